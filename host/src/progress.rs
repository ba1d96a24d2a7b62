//! A progress line on stderr for long loops over pods (`explain`, `apply`,
//! `policy diff`, `topology` with thousands of pods): `evaluating pods:
//! 1200/5000`, redrawn in place with `\r` and cleared at the end.
//!
//! Shown only when the CLI asked for it ([`enable`], for its interactive
//! commands), stderr is a terminal and there are at least [`THRESHOLD`]
//! pods; so pipes, tests, the agent and the webhook never see it, and
//! stdout (the report) is never touched.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Below this many pods the work is done before a person could read a
/// progress line.
pub const THRESHOLD: usize = 200;

/// Set once by the CLI for commands a person waits on.
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Allow progress lines in this process (still only on a terminal).
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Whether a loop over `total` pods shows progress.
pub fn shows(enabled: bool, stderr_is_terminal: bool, total: usize) -> bool {
    enabled && stderr_is_terminal && total >= THRESHOLD
}

/// The line for `done` of `total`, starting with `\r` so it overwrites the
/// previous one.
pub fn line(label: &str, done: usize, total: usize) -> String {
    format!("\r{label}: {done}/{total}")
}

/// What erases a drawn line of `width` characters: blanks, then back to
/// the start (no terminal escape codes, so any terminal clears it).
pub fn clear(width: usize) -> String {
    format!("\r{}\r", " ".repeat(width))
}

/// Whether `done` of `total` starts a new percent (or is the end): at most
/// about a hundred redraws whatever the count, so drawing never costs more
/// than the work.
pub fn redraw_at(done: usize, total: usize) -> bool {
    if total == 0 || done >= total {
        return true;
    }
    let percent = |n: usize| n.saturating_mul(100) / total;
    done == 0 || percent(done) != percent(done - 1)
}

/// One loop's progress line. Dropping it clears the line, so an error
/// that leaves the loop early does not leave a stale line before its
/// message.
pub struct Progress {
    label: &'static str,
    total: usize,
    visible: bool,
    width: usize,
}

impl Progress {
    /// A progress line for `total` pods, shown if [`shows`] says so for
    /// this process's stderr.
    pub fn on_stderr(label: &'static str, total: usize) -> Progress {
        let visible = shows(
            ENABLED.load(Ordering::Relaxed),
            std::io::stderr().is_terminal(),
            total,
        );
        Progress {
            label,
            total,
            visible,
            width: 0,
        }
    }

    /// `done` pods of the total are finished.
    pub fn update(&mut self, done: usize) {
        if !self.visible || !redraw_at(done, self.total) {
            return;
        }
        let text = line(self.label, done, self.total);
        self.width = text.len() - 1;
        // A progress line is a courtesy: a failed write to stderr must not
        // fail the command, whose result goes to stdout.
        let mut stderr = std::io::stderr().lock();
        let _ = stderr.write_all(text.as_bytes());
        let _ = stderr.flush();
    }
}

/// A counting progress ([`Progress::counting_on_stderr`]) is redrawn every
/// this many pods.
pub const COUNT_STEP: usize = 25;

/// The counting line: `\revaluating pods: 1200` (no total).
pub fn count_line(label: &str, done: usize) -> String {
    format!("\r{label}: {done}")
}

impl Progress {
    /// A count of the pods handled so far, for a stream whose total is not
    /// known before its end (a streaming `explain`): shown, when enabled and
    /// on a terminal, once [`THRESHOLD`] pods are done, then every
    /// [`COUNT_STEP`] pods ([`Progress::count`]) and at the end
    /// ([`Progress::finish_count`]); cleared on drop.
    pub fn counting_on_stderr(label: &'static str) -> Progress {
        Progress {
            label,
            total: 0,
            visible: ENABLED.load(Ordering::Relaxed) && std::io::stderr().is_terminal(),
            width: 0,
        }
    }

    /// `done` pods of a counting progress are handled.
    pub fn count(&mut self, done: usize) {
        if done >= THRESHOLD && (done == THRESHOLD || done.is_multiple_of(COUNT_STEP)) {
            self.draw_count(done);
        }
    }

    /// The stream ended after `done` pods: the last count.
    pub fn finish_count(&mut self, done: usize) {
        if done >= THRESHOLD {
            self.draw_count(done);
        }
    }

    fn draw_count(&mut self, done: usize) {
        if !self.visible {
            return;
        }
        let text = count_line(self.label, done);
        self.width = self.width.max(text.len() - 1);
        let mut stderr = std::io::stderr().lock();
        let _ = stderr.write_all(text.as_bytes());
        let _ = stderr.flush();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if self.visible && self.width > 0 {
            let mut stderr = std::io::stderr().lock();
            let _ = stderr.write_all(clear(self.width).as_bytes());
            let _ = stderr.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_only_when_enabled_on_a_terminal_with_many_pods() {
        assert!(shows(true, true, THRESHOLD));
        assert!(shows(true, true, 5000));
        assert!(!shows(true, true, THRESHOLD - 1), "a few pods");
        assert!(!shows(true, false, 5000), "stderr is a pipe or a file");
        assert!(!shows(false, true, 5000), "not an interactive command");
    }

    #[test]
    fn the_line_overwrites_and_the_clear_erases_it() {
        assert_eq!(
            line("evaluating pods", 1200, 5000),
            "\revaluating pods: 1200/5000"
        );
        let drawn = line("evaluating pods", 1200, 5000).len() - 1;
        assert_eq!(clear(drawn), format!("\r{}\r", " ".repeat(26)));
    }

    #[test]
    fn redraws_once_per_percent_and_at_the_end() {
        let redraws = (0..=5000).filter(|&d| redraw_at(d, 5000)).count();
        // 0, then the first count of each percent 1..=99, then 5000.
        assert_eq!(redraws, 101);
        assert!(redraw_at(50, 5000) && !redraw_at(51, 5000));
        assert!(redraw_at(5000, 5000));
        // Fewer pods than percents: every one.
        assert!((0..=7).all(|d| redraw_at(d, 7)));
        assert!(redraw_at(0, 0));
    }

    #[test]
    fn a_hidden_progress_writes_nothing() {
        // Not enabled in this process: width stays 0, so drop writes nothing.
        let mut p = Progress::on_stderr("evaluating pods", 10_000);
        p.update(10);
        assert!(!p.visible);
        assert_eq!(p.width, 0);
    }
}
