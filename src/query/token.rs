//! [`ContinuationToken`]: where a typed query resumes.

use std::fmt;
use std::str::FromStr;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as TOKEN_BASE64;

use super::Continuation;
use crate::error::{Error, Result};

/// The layout version of a token's bytes.
const VERSION: u8 = 1;

/// Where a [`Query`](crate::table::Query) resumes: what
/// [`Page`](crate::table::Page) hands out and
/// [`Query::resume`](crate::table::Query::resume) takes.
///
/// Opaque, URL-safe text for a client to carry (`Display`, `FromStr`,
/// serde as that text). Its checksum makes text cut, altered or made up
/// [`Error::Invalid`] when parsed; its query digest (table, filter,
/// selection) makes resuming another query [`Error::Invalid`] too.
#[derive(Clone, PartialEq, Eq)]
pub struct ContinuationToken {
    pub(crate) at: Continuation,
    pub(crate) query: u64,
}

impl ContinuationToken {
    pub(crate) fn new(at: Continuation, query: u64) -> Self {
        ContinuationToken { at, query }
    }
}

/// FNV-1a, 64 bits: a checksum and a query digest stable across builds
/// and platforms (not a defence against a forger, who has the algorithm).
pub(crate) fn digest(bytes: &[u8]) -> u64 {
    digest_from(0xcbf2_9ce4_8422_2325, bytes)
}

/// [`digest`] from another offset basis (a second, independent hash).
pub(crate) fn digest_from(offset: u64, bytes: &[u8]) -> u64 {
    (bytes.iter()).fold(offset, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn bad_token() -> Error {
    Error::invalid(
        "continuation token",
        "was not made by leasehold, or was cut or altered",
    )
}

impl fmt::Display for ContinuationToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Version, query digest, the position as JSON, then a checksum of
        // everything before it.
        let mut bytes = vec![VERSION];
        bytes.extend_from_slice(&self.query.to_le_bytes());
        bytes.extend_from_slice(&serde_json::to_vec(&self.at).map_err(|_| fmt::Error)?);
        let sum = digest(&bytes);
        bytes.extend_from_slice(&sum.to_le_bytes());
        f.write_str(&TOKEN_BASE64.encode(bytes))
    }
}

impl fmt::Debug for ContinuationToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ContinuationToken")
            .field(&self.to_string())
            .finish()
    }
}

impl FromStr for ContinuationToken {
    type Err = Error;

    /// Reads a token written by `Display`.
    ///
    /// # Errors
    /// [`Error::Invalid`] for text that is not such a token.
    fn from_str(text: &str) -> Result<Self> {
        let bytes = TOKEN_BASE64.decode(text.trim()).map_err(|_| bad_token())?;
        if bytes.len() < 1 + 8 + 8 || bytes[0] != VERSION {
            return Err(bad_token());
        }
        let (body, sum) = bytes.split_at(bytes.len() - 8);
        let sum = u64::from_le_bytes(sum.try_into().map_err(|_| bad_token())?);
        if digest(body) != sum {
            return Err(bad_token());
        }
        let query = u64::from_le_bytes(body[1..9].try_into().map_err(|_| bad_token())?);
        let at: Continuation = serde_json::from_slice(&body[9..]).map_err(|_| bad_token())?;
        Ok(ContinuationToken { at, query })
    }
}

impl serde::Serialize for ContinuationToken {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for ContinuationToken {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token() -> ContinuationToken {
        ContinuationToken::new(
            Continuation {
                next_partition_key: "1!8!cGFydA--".into(),
                next_row_key: Some("1!4!cg--".into()),
            },
            42,
        )
    }

    #[test]
    fn tokens_read_back_as_text_and_through_serde() {
        let t = token();
        let text = t.to_string();
        assert!(
            text.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "{text}"
        );
        assert_eq!(text.parse::<ContinuationToken>().unwrap(), t);
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(json, format!("\"{text}\""));
        assert_eq!(serde_json::from_str::<ContinuationToken>(&json).unwrap(), t);
    }

    #[test]
    fn altered_cut_or_made_up_text_is_invalid() {
        let text = token().to_string();
        let mut altered: Vec<char> = text.chars().collect();
        for i in 0..altered.len() {
            let was = altered[i];
            altered[i] = if was == 'A' { 'B' } else { 'A' };
            let e = altered
                .iter()
                .collect::<String>()
                .parse::<ContinuationToken>()
                .unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::Invalid, "at {i}");
            altered[i] = was;
        }
        for bad in ["", "garbage!", &text[..text.len() - 3], "AAAA"] {
            let e = bad.parse::<ContinuationToken>().unwrap_err();
            assert!(e.to_string().contains("continuation token"), "{e}");
        }
        let e = serde_json::from_str::<ContinuationToken>("\"AAAA\"").unwrap_err();
        assert!(e.to_string().contains("continuation token"), "{e}");
    }
}
