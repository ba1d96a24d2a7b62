//! The core's field error (apimachinery's `field.Error`): every module
//! reports bad input with it, and the boundary encodes it as the contract's
//! `field-error` in the order reported.

use crate::model::truncate;

/// What is wrong with a field (apimachinery's `field.ErrorType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldErrorType {
    /// `FieldValueInvalid`: the value is malformed or out of range.
    Invalid,
    /// `FieldValueForbidden`: the value is well formed but not allowed here.
    Forbidden,
    /// `FieldValueNotSupported`: the value is not one of the supported values.
    NotSupported,
    /// `FieldValueRequired`: a required value is missing.
    Required,
    /// `FieldValueDuplicate`: the value appears twice where it must be unique.
    Duplicate,
    /// `FieldValueTooLong` / `FieldValueTooMany`: a size bound is exceeded.
    TooLong,
}

/// One bad input field, with its path (apimachinery's `field.Error`): what
/// the policy reports for input or a configuration it cannot work with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The field path, e.g. `state.cpu.entries[0].cpuset`.
    pub field: String,
    /// What is wrong with it.
    pub error_type: FieldErrorType,
    /// The message.
    pub message: String,
    /// The offending value, shortened, when it is echoed.
    pub bad_value: Option<String>,
}

impl FieldError {
    /// A field error of `error_type` at `field`.
    pub fn new(
        field: impl Into<String>,
        error_type: FieldErrorType,
        message: impl Into<String>,
        bad_value: Option<String>,
    ) -> Self {
        FieldError {
            field: field.into(),
            error_type,
            message: message.into(),
            bad_value,
        }
    }

    /// `field.Invalid`: `bad` (shortened) is not a valid value of `field`.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>, bad: &str) -> Self {
        FieldError::new(field, FieldErrorType::Invalid, message, Some(truncate(bad)))
    }

    /// `field.Duplicate`: `bad` (shortened) appears more than once.
    pub fn duplicate(field: impl Into<String>, bad: &str) -> Self {
        FieldError::new(
            field,
            FieldErrorType::Duplicate,
            "appears more than once",
            Some(truncate(bad)),
        )
    }
}

/// A field error of `error_type` at `field` that echoes no value.
pub fn field_error(
    field: impl Into<String>,
    error_type: FieldErrorType,
    message: impl Into<String>,
) -> FieldError {
    FieldError::new(field, error_type, message, None)
}
