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
    pub fn from_b64url(s: &str) -> Result<Secret, SecretError> {
        let bytes = URL_SAFE_NO_PAD
            .decode(s.trim())
            .map_err(|_| SecretError::NotBase64url)?;
        let arr: [u8; 32] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| SecretError::Length(bytes.len()))?;
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
/// The error says what is missing or wrong, never the value.
pub fn load(host_secret: Option<&str>, home: &Path) -> Result<Secret, CredentialsError> {
    if let Some(s) = host_secret.filter(|s| !s.trim().is_empty()) {
        return Secret::from_b64url(s).map_err(CredentialsError::HostSecret);
    }
    let path = home.join(CREDENTIALS_FILE);
    // Never block on it (a FIFO), never read a device or gigabytes: a regular file up to the cap.
    let bytes = match base::fsafe::read_capped(&path, base::fsafe::Follow::Yes, MAX_FILE_BYTES) {
        Ok((b, _)) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(CredentialsError::Missing)
        }
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            let why = e
                .get_ref()
                .and_then(|r| r.downcast_ref::<base::fsafe::Refused>())
                .cloned()
                .unwrap_or_else(|| base::fsafe::Refused::Unreadable(e.to_string()));
            return Err(CredentialsError::Refused(why));
        }
        Err(e) => return Err(CredentialsError::Unreadable(e.kind())),
    };
    let text = String::from_utf8(bytes).map_err(|_| CredentialsError::NotUtf8)?;
    from_yaml(&text).map_err(CredentialsError::Document)
}

/// Why a secret string is no browser-session secret (never quotes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretError {
    NotBase64url,
    /// It decodes to this many bytes, not 32.
    Length(usize),
}

impl std::fmt::Display for SecretError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SecretError::NotBase64url => f.write_str("the secret is not unpadded base64url"),
            SecretError::Length(n) => write!(f, "the secret decodes to {n} bytes, not 32"),
        }
    }
}

/// What is wrong with the credentials document (never quotes a value of it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocumentError {
    /// Not YAML; where (line, column) when the parser says.
    NotYaml(Option<(usize, usize)>),
    NoRecord,
    NotGrant,
    NoPayload,
    NotVersion1,
    NoSecret,
    Secret(SecretError),
}

impl std::fmt::Display for DocumentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DocumentError::NotYaml(Some((line, column))) => {
                write!(f, "not valid YAML (line {line}, column {column})")
            }
            DocumentError::NotYaml(None) => f.write_str("not valid YAML"),
            DocumentError::NoRecord => write!(
                f,
                "no records['{RECORD_KEY}'] (has a 0.1.2+ web connection started with this DSH_HOME?)"
            ),
            DocumentError::NotGrant => write!(f, "records['{RECORD_KEY}'] is not a grant record"),
            DocumentError::NoPayload => write!(f, "records['{RECORD_KEY}'] has no payload"),
            DocumentError::NotVersion1 => {
                write!(f, "records['{RECORD_KEY}'].payload.version is not 1")
            }
            DocumentError::NoSecret => write!(
                f,
                "records['{RECORD_KEY}'].payload.secret is missing or not a string"
            ),
            DocumentError::Secret(why) => {
                write!(f, "records['{RECORD_KEY}'].payload.secret is unusable: {why}")
            }
        }
    }
}

/// Why there is no browser-session secret for this call (never quotes it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialsError {
    /// The one the host handed over is unusable.
    HostSecret(SecretError),
    /// `$DSH_HOME/.credentials.yaml` does not exist.
    Missing,
    /// It is not a regular file of at most [`MAX_FILE_BYTES`] (what it is instead).
    Refused(base::fsafe::Refused),
    /// It could not be read (the system's kind of error).
    Unreadable(std::io::ErrorKind),
    NotUtf8,
    /// Read, but the document is wrong.
    Document(DocumentError),
}

impl std::fmt::Display for CredentialsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CredentialsError::HostSecret(why) => write!(
                f,
                "the browser-session secret handed over by the host is unusable: {why}"
            ),
            CredentialsError::Missing => write!(
                f,
                "$DSH_HOME/{CREDENTIALS_FILE} does not exist (the host writes it when its web connection first starts)"
            ),
            CredentialsError::Refused(why) => write!(f, "$DSH_HOME/{CREDENTIALS_FILE} {why}"),
            CredentialsError::Unreadable(kind) => {
                write!(f, "$DSH_HOME/{CREDENTIALS_FILE} could not be read ({kind})")
            }
            CredentialsError::NotUtf8 => write!(f, "$DSH_HOME/{CREDENTIALS_FILE} is not UTF-8 text"),
            CredentialsError::Document(why) => write!(f, "$DSH_HOME/{CREDENTIALS_FILE}: {why}"),
        }
    }
}

impl std::error::Error for CredentialsError {}

/// Largest credentials file read (the host's file is a few hundred bytes).
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// `.credentials.yaml` is readable by other users: its mode (the warning is its `Display`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exposed {
    pub mode: u32,
}

impl std::fmt::Display for Exposed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let who = if self.mode & 0o004 != 0 {
            "every user of this machine"
        } else {
            "its group"
        };
        write!(
            f,
            "$DSH_HOME/{CREDENTIALS_FILE} is readable by {who} (mode {:04o}): whoever reads it can act as the host's browser session; tell the user to run chmod 600 on it",
            self.mode
        )
    }
}

/// Is `.credentials.yaml` readable by its group or by every user?
pub fn exposure(home: &Path) -> Option<Exposed> {
    let path = home.join(CREDENTIALS_FILE);
    let (_, m) = base::fsafe::open_regular(&path, base::fsafe::Follow::Yes, None).ok()?;
    let mode = base::fsafe::mode_of(&m);
    (mode & 0o044 != 0).then_some(Exposed { mode })
}

/// Read the record out of the YAML document.
pub fn from_yaml(text: &str) -> Result<Secret, DocumentError> {
    use serde_norway::Value;
    // The YAML messages can quote input; only the position is kept.
    let doc: Value = serde_norway::from_str(text)
        .map_err(|e| DocumentError::NotYaml(e.location().map(|l| (l.line(), l.column()))))?;
    let record = doc
        .get("records")
        .and_then(|r| r.get(RECORD_KEY))
        .ok_or(DocumentError::NoRecord)?;
    if record.get("kind").and_then(Value::as_str) != Some("grant") {
        return Err(DocumentError::NotGrant);
    }
    let payload = record.get("payload").ok_or(DocumentError::NoPayload)?;
    if payload.get("version").and_then(Value::as_u64) != Some(1) {
        return Err(DocumentError::NotVersion1);
    }
    let secret = payload
        .get("secret")
        .and_then(Value::as_str)
        .ok_or(DocumentError::NoSecret)?;
    Secret::from_b64url(secret).map_err(DocumentError::Secret)
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
        let short = super::super::cookie::b64url(&[7u8; 31]);
        let e = from_yaml(&doc(&short)).unwrap_err();
        assert_eq!(e, DocumentError::Secret(SecretError::Length(31)));
        assert!(!e.to_string().contains(&short), "{e}");
        // cut: not canonical base64url
        let e = from_yaml(&doc(&S[..41])).unwrap_err();
        assert_eq!(e, DocumentError::Secret(SecretError::NotBase64url));
        assert!(!e.to_string().contains(&S[..41]), "{e}");
        // padded
        let e = from_yaml(&doc(&format!("{S}="))).unwrap_err();
        assert_eq!(e, DocumentError::Secret(SecretError::NotBase64url));
        assert!(!e.to_string().contains(S), "{e}");
        // broken YAML that contains the secret
        let e = from_yaml(&format!("records: [{S}\n  : :")).unwrap_err();
        assert!(matches!(e, DocumentError::NotYaml(Some(_))), "{e:?}");
        assert!(!e.to_string().contains(S), "{e}");
        let e = from_yaml("version: 1\nrecords: {}\n").unwrap_err();
        assert_eq!(e, DocumentError::NoRecord);
        assert!(e
            .to_string()
            .starts_with("no records['client-connection/browser-session']"));
        let e = from_yaml(&doc(S).replace("kind: grant", "kind: api-key")).unwrap_err();
        assert_eq!(e, DocumentError::NotGrant);
        assert_eq!(
            e.to_string(),
            "records['client-connection/browser-session'] is not a grant record"
        );
        assert_eq!(
            CredentialsError::Document(DocumentError::Secret(SecretError::Length(31))).to_string(),
            "$DSH_HOME/.credentials.yaml: records['client-connection/browser-session'].payload.secret is unusable: the secret decodes to 31 bytes, not 32"
        );
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
        assert!(
            matches!(
                e,
                CredentialsError::Refused(base::fsafe::Refused::NotRegular { .. })
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("FIFO"), "{e}");
        std::fs::remove_file(&p).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &p).unwrap();
        let e = load(None, d.path()).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        std::fs::remove_file(&p).unwrap();
        std::fs::write(&p, doc(S)).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let w = exposure(d.path()).unwrap().to_string();
        assert!(w.contains("every user") && w.contains("0644"), "{w}");
        assert!(!w.contains(S));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(exposure(d.path()), None);
    }

    #[test]
    fn load_prefers_host_secret_then_file() {
        let dir = tempfile::tempdir().unwrap();
        let e = load(None, dir.path()).unwrap_err();
        assert_eq!(e, CredentialsError::Missing);
        assert!(e.to_string().contains("does not exist"));
        std::fs::write(dir.path().join(CREDENTIALS_FILE), doc(S)).unwrap();
        assert_eq!(load(None, dir.path()).unwrap().bytes(), &[7u8; 32]);
        let other = super::super::cookie::b64url(&[1u8; 32]);
        assert_eq!(load(Some(&other), dir.path()).unwrap().bytes(), &[1u8; 32]);
        let e = load(Some("not-a-secret!"), dir.path()).unwrap_err();
        assert_eq!(e, CredentialsError::HostSecret(SecretError::NotBase64url));
        assert!(!e.to_string().contains("not-a-secret!"));
    }
}
