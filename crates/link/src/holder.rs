//! How the other processes of a home reach linked machines: through the lease holder, over a Unix socket
//! in the 0700 `machine/` folder (`machine/holder.sock`). The holder serves only connections whose
//! `SO_PEERCRED` uid is its own; a client talks only to a socket whose `SO_PEERCRED` pid is the live holder
//! of the lease record ([`crate::lease::holder`]). One request per connection, in the protocol's frames.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::net::{UnixListener, UnixStream};

use crate::error::LinkError;
use crate::node::{CallError, Node};
use crate::wire;
use crate::MachineId;

pub fn socket_path(home: &Path) -> PathBuf {
    crate::machine_dir(home).join("holder.sock")
}

/// What a process asks the holder.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
pub enum Ask {
    Call {
        machine: MachineId,
        body: Value,
    },
    Ping {
        machine: MachineId,
    },
    Invite {
        relay: crate::Relay,
        ttl_ms: u64,
    },
    Accept {
        invite: String,
        name: String,
        my_name: String,
    },
    Unlink {
        name: String,
    },
    Status,
}

/// The holder's answer: the value, or the operation's error as the holder had it (typed across the socket).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Answer {
    Ok(Value),
    Err(LinkError),
}

fn my_uid() -> u32 {
    base::fsafe::my_uid().unwrap_or(u32::MAX)
}

/// Serve the holder's socket until the task is aborted.
pub fn serve(node: Node) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let p = socket_path(node.home());
    // only the lease holder calls this: a socket left by a holder that died is replaced
    let _ = std::fs::remove_file(&p);
    let l = UnixListener::bind(&p)?;
    Ok(tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                continue;
            };
            match s.peer_cred() {
                Ok(c) if c.uid() == my_uid() => {}
                _ => continue, // another user: dropped unread
            }
            let node = node.clone();
            tokio::spawn(async move {
                let Ok(ask) =
                    wire::read_frame::<_, Ask>(&mut s, node.config().frame_deadline).await
                else {
                    return;
                };
                let ans = run(&node, ask).await;
                let _ = wire::write_frame(&mut s, &ans).await;
            });
        }
    }))
}

/// Run an ask on this process's own endpoint (the holder's side; also used in-process by the holder).
pub async fn run(node: &Node, ask: Ask) -> Answer {
    let to_v = |v: Result<Value, serde_json::Error>| {
        v.map(Answer::Ok).unwrap_or_else(|e| {
            Answer::Err(LinkError::Holder {
                detail: e.to_string(),
            })
        })
    };
    match ask {
        Ask::Call { machine, body } => match node.call(&machine, body).await {
            Ok(v) => Answer::Ok(v),
            Err(e) => Answer::Err(e.into()),
        },
        Ask::Ping { machine } => match node.ping(&machine).await {
            Ok(d) => Answer::Ok(Value::from(d.as_secs_f64() * 1000.0)),
            Err(e) => Answer::Err(e.into()),
        },
        Ask::Invite { relay, ttl_ms } => {
            match node.invite(relay, Duration::from_millis(ttl_ms)).await {
                Ok(i) => Answer::Ok(Value::String(i.encode())),
                Err(e) => Answer::Err(e),
            }
        }
        Ask::Accept {
            invite,
            name,
            my_name,
        } => match node.accept_invite(&invite, &name, &my_name).await {
            Ok(l) => to_v(serde_json::to_value(l)),
            Err(e) => Answer::Err(e),
        },
        Ask::Unlink { name } => match node.unlink(&name).await {
            Ok((l, told)) => to_v(serde_json::to_value(
                serde_json::json!({"link": l, "told": told}),
            )),
            Err(e) => Answer::Err(e),
        },
        Ask::Status => {
            let links = crate::store::links(node.home(), node.secret_key());
            let rows: Vec<Value> = links
                .iter()
                .map(|l| {
                    let seen = node.last_seen(&l.id);
                    serde_json::json!({
                        "id": l.id, "name": l.name, "relay": l.relay,
                        "connected": node.connected(&l.id),
                        "lastSeen": seen.map(|s| s.0),
                        "rttMs": seen.and_then(|s| s.1).map(|d| d.as_secs_f64() * 1000.0),
                    })
                })
                .collect();
            Answer::Ok(
                serde_json::json!({"id": node.id(), "pid": std::process::id(), "links": rows}),
            )
        }
    }
}

/// Ask the home's live holder (checked: the socket's peer is the lease record's live pid, of this user).
pub async fn ask(home: &Path, a: &Ask, deadline: Duration) -> Result<Value, LinkError> {
    let rec = crate::lease::holder(home)
        .ok_or_else(|| LinkError::from(CallError::NoHolder("no live holder".into())))?;
    let mut s = UnixStream::connect(socket_path(home))
        .await
        .map_err(|e| LinkError::from(CallError::NoHolder(format!("its socket: {e}"))))?;
    match s.peer_cred() {
        Ok(c) if c.uid() == my_uid() && c.pid().map(|p| p as u32) == Some(rec.pid) => {}
        _ => return Err(CallError::NoHolder("the socket is not the lease holder's".into()).into()),
    }
    // not written whole: the holder cannot have it (it reads a whole frame before it runs anything), so the
    // caller may ask another
    wire::write_frame(&mut s, a)
        .await
        .map_err(|e| LinkError::from(CallError::NoHolder(e.to_string())))?;
    match wire::read_frame::<_, Answer>(&mut s, deadline).await {
        Ok(Answer::Ok(v)) => Ok(v),
        Ok(Answer::Err(e)) => Err(e),
        Err(wire::FrameError::Timeout) => Err(CallError::Timeout.into()),
        // the holder took a call and went (or failed) before answering: it may have reached the machine, so
        // it is never asked again (a request is written at most once) nor said not to have arrived
        Err(_) if matches!(a, Ask::Call { .. }) => Err(CallError::Timeout.into()),
        Err(e) => Err(CallError::NoHolder(e.to_string()).into()),
    }
}
