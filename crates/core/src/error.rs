//! Stable error codes that cross the napi boundary (`err.code` in JS).
//! Tool outcomes are never errors: they are data (`crate::outcome`), rendered to text. These codes are
//! for misuse of the binding itself (a malformed request from the shim or the CLI) and for a failure
//! of the core (a caught panic).

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// A request from the shim or the CLI could not be parsed or is out of range.
    BadRequest,
    /// The core failed (a caught panic, a result that does not fit its type).
    Internal,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 2] = [ErrorCode::BadRequest, ErrorCode::Internal];
}

impl AsRef<str> for ErrorCode {
    fn as_ref(&self) -> &str {
        match self {
            ErrorCode::BadRequest => "E_BAD_REQUEST",
            ErrorCode::Internal => "E_INTERNAL",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_stable_and_distinct() {
        let codes: Vec<&str> = ErrorCode::ALL.iter().map(AsRef::as_ref).collect();
        assert_eq!(codes, ["E_BAD_REQUEST", "E_INTERNAL"]);
    }
}
