//! Stable error codes that cross the napi boundary (`err.code` in JS).
//! Tool outcomes are never errors: they are text. These codes are for misuse of the
//! binding itself (a malformed request from the shim, a bad key) and for IO the shim asked for.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// The request JSON from the shim could not be parsed.
    BadRequest,
    /// A key (cookie secret) was not usable.
    BadKey,
    /// File system error.
    Io,
    /// zstd decoding error.
    Zstd,
    /// The host did not answer in time.
    Timeout,
    /// The host could not be reached.
    Connect,
    /// The host answered with an HTTP error.
    Http,
    /// A URL that is not loopback was given.
    NotLoopback,
    /// Anything else (including a caught panic).
    Internal,
}

impl AsRef<str> for ErrorCode {
    fn as_ref(&self) -> &str {
        match self {
            ErrorCode::BadRequest => "E_BAD_REQUEST",
            ErrorCode::BadKey => "E_BAD_KEY",
            ErrorCode::Io => "E_IO",
            ErrorCode::Zstd => "E_ZSTD",
            ErrorCode::Timeout => "E_TIMEOUT",
            ErrorCode::Connect => "E_CONNECT",
            ErrorCode::Http => "E_HTTP",
            ErrorCode::NotLoopback => "E_NOT_LOOPBACK",
            ErrorCode::Internal => "E_INTERNAL",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_ref())
    }
}

/// An error with a stable code and a human message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoreError {
    pub code: ErrorCode,
    pub message: String,
}

impl CoreError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        CoreError {
            code,
            message: message.into(),
        }
    }
}

impl fmt::Display for CoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for CoreError {}

pub type CoreResult<T> = Result<T, CoreError>;
