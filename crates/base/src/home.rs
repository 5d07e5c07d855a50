//! Paths under DSH_HOME: the home itself, as the host resolves it, and the plugin's folder in it.

use std::path::{Path, PathBuf};

use crate::names::DIR_NAME;

/// Resolve DSH_HOME as the host does: explicit → `$DSH_HOME` (blank = unset, `~` expanded) → `~/.dsh`.
/// [R8 `packages/util/home-paths/src/index.ts` `resolveDshHome`]
pub fn resolve_dsh_home(explicit: Option<&str>) -> PathBuf {
    fn expand(p: &str) -> PathBuf {
        let home = std::env::var_os("HOME")
            .or_else(|| std::env::var_os("USERPROFILE"))
            .map(PathBuf::from)
            .unwrap_or_default();
        if p == "~" {
            home
        } else if let Some(rest) = p.strip_prefix("~/").or_else(|| p.strip_prefix("~\\")) {
            home.join(rest)
        } else {
            PathBuf::from(p)
        }
    }
    if let Some(e) = explicit.map(str::trim).filter(|s| !s.is_empty()) {
        return expand(e);
    }
    if let Ok(v) = std::env::var("DSH_HOME") {
        if !v.trim().is_empty() {
            return expand(v.trim());
        }
    }
    expand("~").join(".dsh")
}

/// `$DSH_HOME/dsh-session-mail`: the plugin's folder (ledger, presence, mailbox).
pub fn plugin_dir(home: &Path) -> PathBuf {
    home.join(DIR_NAME)
}
