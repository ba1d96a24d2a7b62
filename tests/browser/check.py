"""Check a Chromium screenshot of a topology SVG (stdlib only).

check.py PNG DOM LABEL...: the PNG decodes, is not blank (many non-white
pixels, several colours), shows the reserved-CPU fill (#e15759) and the
first pod's fill (#4e79a7); the DOM the browser dumped holds every LABEL
(XML-escaped as the SVG has it).
"""
import sys
import zlib
import struct
from xml.sax.saxutils import escape


def read_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"{path}: not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        sys.exit(f"{path}: unexpected PNG format {header}")
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev, at = [], bytearray(stride), 0
    for _ in range(height):
        kind = raw[at]
        line = bytearray(raw[at + 1:at + 1 + stride])
        at += 1 + stride
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 255
        rows.append(bytes(line))
        prev = line
    pixels = {}
    for line in rows:
        for x in range(0, stride, bpp):
            px = line[x:x + 3]
            pixels[px] = pixels.get(px, 0) + 1
    return width, height, pixels


def main():
    png, dom, labels = sys.argv[1], sys.argv[2], sys.argv[3:]
    width, height, pixels = read_png(png)
    total = width * height
    white = pixels.get(b"\xff\xff\xff", 0)
    if total - white < total // 20:
        sys.exit(f"{png}: nearly blank ({total - white} of {total} pixels not white)")
    if len(pixels) < 8:
        sys.exit(f"{png}: only {len(pixels)} colours")
    for name, rgb in (("reserved", b"\xe1\x57\x59"), ("first pod", b"\x4e\x79\xa7")):
        if pixels.get(rgb, 0) < 100:
            sys.exit(f"{png}: the {name} fill #{rgb.hex()} is not drawn")
    text = open(dom, encoding="utf-8").read()
    missing = [l for l in labels if escape(l) not in text and l not in text]
    if missing:
        sys.exit(f"{dom}: labels missing from the rendered DOM: {missing}")
    print(f"browser: {png.rsplit('/', 1)[-1]} {width}x{height}, {len(pixels)} colours, "
          f"{total - white} non-white pixels, {len(labels)} labels")


main()
