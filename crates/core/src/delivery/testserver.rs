//! A tiny HTTP/1.1 server on `tokio::net::TcpListener` for the delivery tests: it records every request
//! and answers with whatever the test's script says (a reply, a delay, a reset, a silent close).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One recorded request.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// What the server does with a request.
pub enum Act {
    /// Answer with this status and body (`application/json` when it starts with `{`).
    Reply(u16, String),
    /// Wait this long, then close without answering.
    Stall(Duration),
    /// Reset the connection (SO_LINGER 0) after reading the request.
    Reset,
    /// Close the connection after reading the request, without answering.
    Close,
}

pub type Log = Arc<Mutex<Vec<Recorded>>>;

pub fn ok_accepted(rpc_id: &str) -> Act {
    Act::Reply(
        200,
        format!(
            r#"{{"type":"server-response","rpcId":"{rpc_id}","result":{{"ok":true,"value":{{"accepted":true}}}}}}"#
        ),
    )
}

pub fn rpc_error(code: &str, message: &str) -> Act {
    Act::Reply(
        200,
        serde_json::json!({"type":"server-response","rpcId":"x","result":{"ok":false,"error":{"code":code,"message":message,"details":{}}}})
            .to_string(),
    )
}

/// Start a server; `script(n, request)` decides the answer to the n-th request (0-based).
pub async fn serve<F>(script: F) -> (String, Log)
where
    F: Fn(usize, &Recorded) -> Act + Send + Sync + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let script = Arc::new(script);
    let log2 = log.clone();
    tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                return;
            };
            let script = script.clone();
            let log = log2.clone();
            tokio::spawn(async move {
                let _ = handle(sock, script.as_ref(), &log).await;
            });
        }
    });
    (format!("http://127.0.0.1:{}", addr.port()), log)
}

async fn handle<F>(mut sock: TcpStream, script: &F, log: &Log) -> std::io::Result<()>
where
    F: Fn(usize, &Recorded) -> Act,
{
    let mut buf = Vec::new();
    let mut tmp = [0u8; 8192];
    let head_end = loop {
        let n = sock.read(&mut tmp).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&tmp[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let first = lines.next().unwrap_or("");
    let mut parts = first.split(' ');
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| {
            l.split_once(':')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        })
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = sock.read(&mut tmp).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&tmp[..n]);
    }
    let body = String::from_utf8_lossy(&buf[head_end..]).to_string();
    let rec = Recorded {
        method,
        path,
        headers,
        body,
    };
    let n = {
        let mut l = log.lock().unwrap();
        l.push(rec.clone());
        l.len() - 1
    };
    match script(n, &rec) {
        Act::Reply(status, body) => {
            let ctype = if body.starts_with('{') {
                "application/json"
            } else {
                "text/plain"
            };
            let resp = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            sock.write_all(resp.as_bytes()).await?;
            sock.shutdown().await?;
        }
        Act::Stall(d) => {
            tokio::time::sleep(d).await;
        }
        Act::Reset => {
            sock.set_zero_linger()?;
            drop(sock);
        }
        Act::Close => {
            sock.shutdown().await?;
        }
    }
    Ok(())
}
