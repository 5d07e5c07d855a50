//! The cordis patch layers (bundle patches, profile, home) applied to one row, as the host's include
//! loader applies them.

use serde::Serialize;
use serde_norway::Value as Yaml;

/// The layers' verdict on one row (`patchRowState`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "napi", napi_derive::napi(object, use_nullable = true))]
pub struct RowState {
    pub inserted: bool,
    pub inserted_by: Option<String>,
    pub disabled: bool,
    pub disabled_by: Option<String>,
    pub config_enabled: Option<bool>,
    pub config_by: Option<String>,
    /// A layer that is not a patch file (not YAML, not an array, an entry not a mapping).
    pub errors: Vec<String>,
    /// Entries the host skips (an override naming another module).
    pub notes: Vec<String>,
}

// doctor: the patch layers' verdict on our row

/// One cordis patch layer, in the host's order (bundle patches, profile, home).
#[derive(Debug, Clone)]
#[cfg_attr(
    feature = "napi",
    napi_derive::napi(object, use_nullable = true, js_name = "PatchLayer")
)]
pub struct Layer {
    pub label: String,
    /// The file's text; `None` when the file does not exist (an absent layer is fine).
    pub text: Option<String>,
}

fn yaml_str<'a>(m: &'a serde_norway::Mapping, key: &str) -> Option<&'a str> {
    m.get(Yaml::String(key.into())).and_then(Yaml::as_str)
}

/// Apply the layers to one row the way the include loader does: an `insert` row with that id
/// creates it; a later non-insert entry `{id, name?, …}` replaces each key it names (a `name` that
/// differs skips the entry). Reports whether the row exists, its final `disabled`, the plugin
/// config's `enabled`, and which layer decided them. [shared plugin-contract.md §1.2, §3;
/// `@deepseek-ai/cordis-plugin-include` `applyEntryPatches`]
pub fn row_state(layers: &[Layer], row_id: &str, module: &str) -> RowState {
    let mut inserted_by: Option<String> = None;
    let mut disabled = false;
    let mut disabled_by: Option<String> = None;
    let mut config: Option<Yaml> = None;
    let mut config_by: Option<String> = None;
    let mut errors: Vec<String> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    for layer in layers {
        let Some(text) = &layer.text else { continue };
        let doc: Yaml = match serde_norway::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                errors.push(format!("{}: not valid YAML ({e})", layer.label));
                continue;
            }
        };
        let entries = match doc {
            Yaml::Null => continue,
            Yaml::Sequence(s) => s,
            _ => {
                errors.push(format!(
                    "{}: must be a top-level YAML array of patch entries",
                    layer.label
                ));
                continue;
            }
        };
        for entry in entries {
            let Yaml::Mapping(m) = entry else {
                errors.push(format!("{}: an entry is not a mapping", layer.label));
                continue;
            };
            if let Some(Yaml::Sequence(rows)) = m.get(Yaml::String("insert".into())) {
                for row in rows {
                    let Yaml::Mapping(r) = row else { continue };
                    if yaml_str(r, "id") == Some(row_id) {
                        inserted_by = Some(layer.label.clone());
                        disabled = matches!(
                            r.get(Yaml::String("disabled".into())),
                            Some(Yaml::Bool(true))
                        );
                        disabled_by = disabled.then(|| layer.label.clone());
                        config = r.get(Yaml::String("config".into())).cloned();
                        config_by = config.as_ref().map(|_| layer.label.clone());
                    }
                }
                continue;
            }
            if yaml_str(&m, "id") != Some(row_id) {
                continue;
            }
            if let Some(name) = yaml_str(&m, "name") {
                if name != module {
                    notes.push(format!("{}: an override for {row_id} names {name:?}, not {module:?}; the host skips it", layer.label));
                    continue;
                }
            }
            if let Some(d) = m.get(Yaml::String("disabled".into())) {
                disabled = matches!(d, Yaml::Bool(true));
                disabled_by = Some(layer.label.clone());
            }
            if let Some(c) = m.get(Yaml::String("config".into())) {
                config = Some(c.clone());
                config_by = Some(layer.label.clone());
            }
        }
    }
    let config_enabled = match &config {
        Some(Yaml::Mapping(c)) => match c.get(Yaml::String("enabled".into())) {
            Some(Yaml::Bool(b)) => Some(*b),
            _ => None,
        },
        _ => None,
    };
    RowState {
        inserted: inserted_by.is_some(),
        inserted_by,
        disabled,
        disabled_by,
        config_enabled,
        config_by,
        errors,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// The row state as the binding's JS sees it (camelCase).
    fn row_state_json(layers: &[Layer], row_id: &str, module: &str) -> Value {
        serde_json::to_value(super::row_state(layers, row_id, module)).unwrap()
    }

    fn layer(label: &str, text: Option<&str>) -> Layer {
        Layer {
            label: label.into(),
            text: text.map(str::to_string),
        }
    }

    #[test]
    fn row_state_applies_the_layers_in_order() {
        let bundle = layer(
            "bundle",
            Some("# c\n- insert:\n    - id: dsh-session-mail\n      name: dsh-session-mail\n"),
        );
        let s = row_state_json(
            &[
                bundle.clone(),
                layer("profile", Some("[]\n")),
                layer("home", None),
            ],
            "dsh-session-mail",
            "dsh-session-mail",
        );
        assert_eq!(
            (s["inserted"].as_bool(), s["disabled"].as_bool()),
            (Some(true), Some(false))
        );
        let off = layer(
            "profile",
            Some("- id: other\n  disabled: true\n- id: dsh-session-mail\n  disabled: true\n"),
        );
        let s = row_state_json(
            &[bundle.clone(), off.clone()],
            "dsh-session-mail",
            "dsh-session-mail",
        );
        assert_eq!(s["disabled"], true);
        assert_eq!(s["disabledBy"], "profile");
        // the home layer comes last and wins
        let on = layer("home", Some("- id: dsh-session-mail\n  disabled: false\n"));
        let s = row_state_json(
            &[bundle.clone(), off.clone(), on],
            "dsh-session-mail",
            "dsh-session-mail",
        );
        assert_eq!(s["disabled"], false);
        // a name mismatch is skipped by the host
        let other_name = layer(
            "profile",
            Some("- id: dsh-session-mail\n  name: something-else\n  disabled: true\n"),
        );
        let s = row_state_json(
            &[bundle.clone(), other_name],
            "dsh-session-mail",
            "dsh-session-mail",
        );
        assert_eq!(s["disabled"], false);
        assert_eq!(s["notes"].as_array().unwrap().len(), 1);
        // `disabled: yes` is a string in the host's JSON schema, not true
        let yes = layer("profile", Some("- id: dsh-session-mail\n  disabled: yes\n"));
        assert_eq!(
            row_state_json(
                &[bundle.clone(), yes],
                "dsh-session-mail",
                "dsh-session-mail"
            )["disabled"],
            false
        );
        // config replaced wholesale; enabled: false switches the plugin off
        let cfg = layer(
            "profile",
            Some("- id: dsh-session-mail\n  config: { enabled: false }\n"),
        );
        let s = row_state_json(
            &[bundle.clone(), cfg],
            "dsh-session-mail",
            "dsh-session-mail",
        );
        assert_eq!(s["configEnabled"], false);
        // broken layers are reported
        let bad = layer("profile", Some("id: x\n"));
        let s = row_state_json(
            &[bundle, bad, layer("home", Some("- [\n"))],
            "dsh-session-mail",
            "dsh-session-mail",
        );
        assert_eq!(s["errors"].as_array().unwrap().len(), 2, "{s}");
        let none = row_state_json(
            &[layer("profile", Some("[]"))],
            "dsh-session-mail",
            "dsh-session-mail",
        );
        assert_eq!(none["inserted"], false);
    }
}
