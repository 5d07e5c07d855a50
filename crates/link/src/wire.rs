//! The protocol: ALPN [`ALPN`] for requests between linked machines, [`LINK_ALPN`] for the one-time link
//! handshake. One bidirectional QUIC stream per request: the caller writes one frame and finishes its side,
//! the callee answers with one frame. A frame is a 4-byte big-endian length and that many bytes of JSON;
//! a length over the bound is refused before a byte of the body is read, and a frame must arrive whole
//! within its deadline (a peer that stalls mid-frame is dropped on time). The same frames carry the holder's
//! Unix socket ([`crate::holder`]).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

pub const ALPN: &[u8] = b"dsh-session-mail/1";
pub const LINK_ALPN: &[u8] = b"dsh-session-mail/link/1";

/// Largest frame either side accepts (and sends).
pub const MAX_FRAME: usize = crate::MAX_FRAME;

#[derive(Debug)]
pub enum FrameError {
    /// The peer said more than the bound.
    TooLarge(usize),
    /// Not JSON of the expected shape.
    Garbage(String),
    /// The frame did not arrive whole in time.
    Timeout,
    /// The stream ended or failed.
    Io(String),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::TooLarge(n) => {
                write!(f, "a frame of {n} bytes is over the bound of {MAX_FRAME}")
            }
            FrameError::Garbage(e) => write!(f, "a frame that is not the protocol's: {e}"),
            FrameError::Timeout => f.write_str("the frame did not arrive in time"),
            FrameError::Io(e) => write!(f, "the stream failed: {e}"),
        }
    }
}

/// Write one frame (length, then body).
pub async fn write_frame<W: AsyncWrite + Unpin, T: Serialize>(
    w: &mut W,
    v: &T,
) -> Result<(), FrameError> {
    let body = serde_json::to_vec(v).map_err(|e| FrameError::Garbage(e.to_string()))?;
    if body.len() > MAX_FRAME {
        return Err(FrameError::TooLarge(body.len()));
    }
    let mut buf = Vec::with_capacity(4 + body.len());
    buf.extend_from_slice(&(body.len() as u32).to_be_bytes());
    buf.extend_from_slice(&body);
    w.write_all(&buf)
        .await
        .map_err(|e| FrameError::Io(e.to_string()))?;
    w.flush().await.map_err(|e| FrameError::Io(e.to_string()))
}

/// Read one raw frame within `deadline`; the length is checked before the body is read.
pub async fn read_raw<R: AsyncRead + Unpin>(
    r: &mut R,
    deadline: Duration,
) -> Result<Vec<u8>, FrameError> {
    tokio::time::timeout(deadline, async {
        let mut len = [0u8; 4];
        r.read_exact(&mut len)
            .await
            .map_err(|e| FrameError::Io(e.to_string()))?;
        let n = u32::from_be_bytes(len) as usize;
        if n > MAX_FRAME {
            return Err(FrameError::TooLarge(n));
        }
        let mut body = vec![0u8; n];
        r.read_exact(&mut body)
            .await
            .map_err(|e| FrameError::Io(e.to_string()))?;
        Ok(body)
    })
    .await
    .map_err(|_| FrameError::Timeout)?
}

/// Read one frame of type `T` within `deadline`.
pub async fn read_frame<R: AsyncRead + Unpin, T: for<'de> Deserialize<'de>>(
    r: &mut R,
    deadline: Duration,
) -> Result<T, FrameError> {
    let body = read_raw(r, deadline).await?;
    serde_json::from_slice(&body).map_err(|e| FrameError::Garbage(e.to_string()))
}

/// A request on [`ALPN`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Request {
    /// Run the receiving home's handler on `body`.
    Call { body: serde_json::Value },
    /// A round trip, nothing else.
    Ping,
    /// The sender's human unlinked this machine: forget the sender now.
    Unlink,
}

/// The answer to a [`Request`].
/// (`{"ok": <value>}` or `{"err": {code, message}}`: a `null` answer is an answer.)
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Response {
    Ok(serde_json::Value),
    Err(WireError),
}

pub use crate::error::WireError;

/// The first frame on [`LINK_ALPN`]: the invite's secret, and what the joiner tells of itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Join {
    pub secret: String,
    /// The name the joiner suggests for itself (its host name); the inviter's home makes it unique.
    pub name: String,
    pub addrs: Vec<std::net::SocketAddr>,
}

/// The inviter's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Joined {
    pub ok: bool,
    /// The refusal's words (what an older joiner reads).
    #[serde(default)]
    pub error: Option<String>,
    /// The refusal, typed.
    #[serde(default)]
    pub refusal: Option<crate::error::LinkError>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub addrs: Vec<std::net::SocketAddr>,
}

/// Close codes, told to a peer whose connection is refused.
pub mod close {
    /// The connecting endpoint is not linked with this machine.
    pub const NOT_LINKED: u32 = 403;
    /// Too many connections at once.
    pub const BUSY: u32 = 503;
    /// A link handshake without a waiting invite.
    pub const NO_INVITE: u32 = 404;
    /// The protocol was not followed.
    pub const PROTOCOL: u32 = 400;
    pub const BYE: u32 = 0;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_frame_round_trips_and_an_oversized_or_garbage_one_is_refused_before_its_body() {
        let (mut a, mut b) = tokio::io::duplex(64);
        let w = tokio::spawn(async move {
            write_frame(&mut a, &Request::Ping).await.unwrap();
            a
        });
        let r: Request = read_frame(&mut b, Duration::from_secs(5)).await.unwrap();
        assert!(matches!(r, Request::Ping));
        let mut a = w.await.unwrap();
        // a length over the bound: refused from the 4 bytes alone (no body follows)
        a.write_all(&((MAX_FRAME as u32) + 1).to_be_bytes())
            .await
            .unwrap();
        assert!(matches!(
            read_raw(&mut b, Duration::from_secs(5)).await,
            Err(FrameError::TooLarge(_))
        ));
        // garbage
        a.write_all(&3u32.to_be_bytes()).await.unwrap();
        a.write_all(b"{x]").await.unwrap();
        let g: Result<Request, _> = read_frame(&mut b, Duration::from_secs(5)).await;
        assert!(matches!(g, Err(FrameError::Garbage(_))));
        // stalled mid-frame: half a body, then nothing
        a.write_all(&10u32.to_be_bytes()).await.unwrap();
        a.write_all(b"{\"ki").await.unwrap();
        let t = std::time::Instant::now();
        let s = read_raw(&mut b, Duration::from_millis(200)).await;
        assert!(matches!(s, Err(FrameError::Timeout)));
        assert!(t.elapsed() < Duration::from_secs(5));
    }
}
