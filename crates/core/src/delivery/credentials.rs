//! The browser-session signing secret: from the shim (`host.secret`) or `$DSH_HOME/.credentials.yaml`.
//!
//! Host facts [Z17 `packages/client/connection/src/browser-auth.ts` `AUTH_RECORD_KEY`, `storedSecret`,
//! `canonicalSecret`; Z17 `packages/credentials/credentials-local/src/index.ts` `CREDENTIALS_FILENAME`,
//! `parseCredentialsDocument`]: the record `credentialKey('client-connection', 'browser-session')` sits at
//! `records['client-connection/browser-session'] = {kind: grant, payload: {version: 1, secret: <base64url>}}`
//! and the secret must be canonical unpadded base64url of exactly 32 bytes.
//!
//! The secret is never printed: [`Secret`]'s `Debug` is redacted and no error text here quotes a
//! value read from the file.

use std::path::Path;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

/// File name under DSH_HOME.
pub const CREDENTIALS_FILE: &str = ".credentials.yaml";
/// The record key.
pub const RECORD_KEY: &str = "client-connection/browser-session";

/// 32 secret bytes. Not `Display`, redacted `Debug`, wiped on drop.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret([u8; 32]);

impl Secret {
    /// Decode canonical unpadded base64url of exactly 32 bytes.
    pub fn from_b64url(s: &str) -> Result<Secret, String> {
        let bytes = URL_SAFE_NO_PAD
            .decode(s.trim())
            .map_err(|_| "the secret is not unpadded base64url".to_string())?;
        let arr: [u8; 32] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| format!("the secret decodes to {} bytes, not 32", bytes.len()))?;
        Ok(Secret(arr))
    }

    pub(crate) fn bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        // zeroize's writes are volatile and fenced: the wipe is not optimized away.
        zeroize::Zeroize::zeroize(&mut self.0);
    }
}

/// The secret for this call: `host_secret` when the shim handed one over, else the credentials file.
/// The error text says what is missing or wrong, never the value.
pub fn load(host_secret: Option<&str>, home: &Path) -> Result<Secret, String> {
    if let Some(s) = host_secret.filter(|s| !s.trim().is_empty()) {
        return Secret::from_b64url(s).map_err(|why| {
            format!("the browser-session secret handed over by the host is unusable: {why}")
        });
    }
    let path = home.join(CREDENTIALS_FILE);
    // Never block on it (a FIFO), never read a device or gigabytes: a regular file up to the cap.
    let bytes = match base::fsafe::read_capped(&path, base::fsafe::Follow::Yes, MAX_FILE_BYTES) {
        Ok((b, _)) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!(
                "$DSH_HOME/{CREDENTIALS_FILE} does not exist (the host writes it when its web connection first starts)"
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            return Err(format!("$DSH_HOME/{CREDENTIALS_FILE} {e}"))
        }
        Err(e) => return Err(format!("$DSH_HOME/{CREDENTIALS_FILE} could not be read ({})", e.kind())),
    };
    let text = String::from_utf8(bytes)
        .map_err(|_| format!("$DSH_HOME/{CREDENTIALS_FILE} is not UTF-8 text"))?;
    from_yaml(&text).map_err(|why| format!("$DSH_HOME/{CREDENTIALS_FILE}: {why}"))
}

/// Largest credentials file read (the host's file is a few hundred bytes).
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// A warning when `$DSH_HOME/.credentials.yaml` can be read by other users (group or world):
/// anyone who reads it can act as the host's browser session. `None` when private or absent.
pub fn exposure_warning(home: &Path) -> Option<String> {
    let path = home.join(CREDENTIALS_FILE);
    let (_, m) = base::fsafe::open_regular(&path, base::fsafe::Follow::Yes, None).ok()?;
    let mode = base::fsafe::mode_of(&m);
    (mode & 0o044 != 0).then(|| {
        let who = if mode & 0o004 != 0 { "every user of this machine" } else { "its group" };
        format!(
            "$DSH_HOME/{CREDENTIALS_FILE} is readable by {who} (mode {mode:04o}): whoever reads it can act as the host's browser session; tell the user to run chmod 600 on it"
        )
    })
}

/// Read the record out of the YAML document.
pub fn from_yaml(text: &str) -> Result<Secret, String> {
    use serde_norway::Value;
    // The YAML messages can quote input; only the position is reported.
    let doc: Value = serde_norway::from_str(text).map_err(|e| match e.location() {
        Some(l) => format!("not valid YAML (line {}, column {})", l.line(), l.column()),
        None => "not valid YAML".to_string(),
    })?;
    let record = doc
        .get("records")
        .and_then(|r| r.get(RECORD_KEY))
        .ok_or_else(|| format!("no records['{RECORD_KEY}'] (has a 0.1.2+ web connection started with this DSH_HOME?)"))?;
    if record.get("kind").and_then(Value::as_str) != Some("grant") {
        return Err(format!("records['{RECORD_KEY}'] is not a grant record"));
    }
    let payload = record
        .get("payload")
        .ok_or_else(|| format!("records['{RECORD_KEY}'] has no payload"))?;
    if payload.get("version").and_then(Value::as_u64) != Some(1) {
        return Err(format!("records['{RECORD_KEY}'].payload.version is not 1"));
    }
    let secret = payload
        .get("secret")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            format!("records['{RECORD_KEY}'].payload.secret is missing or not a string")
        })?;
    Secret::from_b64url(secret)
        .map_err(|why| format!("records['{RECORD_KEY}'].payload.secret is unusable: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: &str = "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc"; // 32 × 0x07

    fn doc(secret: &str) -> String {
        format!(
            "version: 1\nrefs: {{}}\nrecords:\n  client-connection/browser-session:\n    kind: grant\n    payload:\n      version: 1\n      secret: {secret}\n  llm/deepseek:\n    kind: api-key\n    payload: x\n"
        )
    }

    #[test]
    fn reads_the_record() {
        let s = from_yaml(&doc(S)).unwrap();
        assert_eq!(s.bytes(), &[7u8; 32]);
        assert_eq!(format!("{s:?}"), "Secret(<redacted>)");
    }

    #[test]
    fn errors_never_quote_the_secret() {
        // 31 bytes
        let short = &S[..41];
        let e = from_yaml(&doc(short)).unwrap_err();
        assert!(!e.contains(short), "{e}");
        assert!(e.contains("not 32") || e.contains("base64url"), "{e}");
        // padded
        let e = from_yaml(&doc(&format!("{S}="))).unwrap_err();
        assert!(!e.contains(S), "{e}");
        // broken YAML that contains the secret
        let e = from_yaml(&format!("records: [{S}\n  : :")).unwrap_err();
        assert!(!e.contains(S), "{e}");
        let e = from_yaml("version: 1\nrecords: {}\n").unwrap_err();
        assert!(e.contains("no records['client-connection/browser-session']"));
        let e = from_yaml(&doc(S).replace("kind: grant", "kind: api-key")).unwrap_err();
        assert!(e.contains("not a grant"));
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_or_device_is_refused_without_blocking_and_exposure_is_warned() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(CREDENTIALS_FILE);
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = load(None, d.path()).unwrap_err();
        assert!(e.contains("FIFO"), "{e}");
        std::fs::remove_file(&p).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &p).unwrap();
        let e = load(None, d.path()).unwrap_err();
        assert!(e.contains("character device"), "{e}");
        std::fs::remove_file(&p).unwrap();
        std::fs::write(&p, doc(S)).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let w = exposure_warning(d.path()).unwrap();
        assert!(w.contains("every user") && w.contains("0644"), "{w}");
        assert!(!w.contains(S));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(exposure_warning(d.path()), None);
    }

    #[test]
    fn load_prefers_host_secret_then_file() {
        let dir = tempfile::tempdir().unwrap();
        let e = load(None, dir.path()).unwrap_err();
        assert!(e.contains("does not exist"));
        std::fs::write(dir.path().join(CREDENTIALS_FILE), doc(S)).unwrap();
        assert_eq!(load(None, dir.path()).unwrap().bytes(), &[7u8; 32]);
        let other = super::super::cookie::b64url(&[1u8; 32]);
        assert_eq!(load(Some(&other), dir.path()).unwrap().bytes(), &[1u8; 32]);
        let e = load(Some("not-a-secret!"), dir.path()).unwrap_err();
        assert!(!e.contains("not-a-secret!"));
    }
}
