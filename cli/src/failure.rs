//! Why the command failed, and with which exit code.

use leasehold::{Error, ErrorKind};

/// Why the command failed, and with which exit code.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: u8,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) const FAILED: u8 = 1;
    pub(crate) const USAGE: u8 = 2;
    pub(crate) const NOT_FOUND: u8 = 3;

    pub(crate) fn not_found(message: impl Into<String>) -> Failure {
        Failure {
            code: Failure::NOT_FOUND,
            message: message.into(),
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        let code = match e.kind() {
            ErrorKind::NotFound => Failure::NOT_FOUND,
            ErrorKind::Invalid => Failure::USAGE,
            _ => Failure::FAILED,
        };
        Failure {
            code,
            message: e.to_string(),
        }
    }
}
