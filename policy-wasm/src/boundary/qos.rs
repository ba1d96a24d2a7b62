//! The QoS class between the core ([`crate::qos::QosClass`]) and the
//! contract's `qos-class`: the same three values both ways.

use crate::qos::QosClass;
use crate::wit;

impl From<QosClass> for wit::QosClass {
    fn from(class: QosClass) -> Self {
        match class {
            QosClass::Guaranteed => wit::QosClass::Guaranteed,
            QosClass::Burstable => wit::QosClass::Burstable,
            QosClass::BestEffort => wit::QosClass::BestEffort,
        }
    }
}

impl From<wit::QosClass> for QosClass {
    fn from(class: wit::QosClass) -> Self {
        match class {
            wit::QosClass::Guaranteed => QosClass::Guaranteed,
            wit::QosClass::Burstable => QosClass::Burstable,
            wit::QosClass::BestEffort => QosClass::BestEffort,
        }
    }
}
