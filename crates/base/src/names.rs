//! The plugin's names on disk and on the wire: its folder under DSH_HOME, the prefix of the request
//! ids it mints.

/// The plugin's directory under DSH_HOME (and its plugin name in a message's `source.plugin`).
pub const DIR_NAME: &str = "dsh-session-mail";

/// Request ids this plugin puts on its deliveries (`source.rpcId`): `dsh-session-mail:<uuid>`.
pub const REQUEST_ID_PREFIX: &str = "dsh-session-mail:";
