//! The tools this plugin provides, by name (the model calls them; names are stable), and the two send
//! tools' argument spellings.

/// The tools this plugin provides (names are stable: the model calls them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tool {
    SessionsList,
    SessionsRead,
    SessionsSend,
    SendSessionMessage,
}

impl Tool {
    pub const ALL: [Tool; 4] = [
        Tool::SessionsList,
        Tool::SessionsRead,
        Tool::SessionsSend,
        Tool::SendSessionMessage,
    ];

    pub fn parse(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Tool::SessionsList => "sessions_list",
            Tool::SessionsRead => "sessions_read",
            Tool::SessionsSend => "sessions_send",
            Tool::SendSessionMessage => "send_session_message",
        }
    }
}

/// Which send tool is answering (the reply line and the urgent spelling differ).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendTool {
    SessionsSend,
    SendSessionMessage,
}

impl SendTool {
    pub fn from_name(name: &str) -> SendTool {
        if name == "sessions_send" {
            SendTool::SessionsSend
        } else {
            SendTool::SendSessionMessage
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            SendTool::SessionsSend => "sessions_send",
            SendTool::SendSessionMessage => "send_session_message",
        }
    }
    pub fn target_arg(self) -> &'static str {
        match self {
            SendTool::SessionsSend => "session_id",
            SendTool::SendSessionMessage => "toSessionId",
        }
    }
    pub fn known(self) -> &'static [&'static str] {
        match self {
            SendTool::SessionsSend => &["session_id", "message", "mode", "notify_when_idle"],
            SendTool::SendSessionMessage => {
                &["toSessionId", "message", "urgent", "notify_when_idle"]
            }
        }
    }
    pub fn usage(self) -> &'static str {
        match self {
            SendTool::SessionsSend => {
                r#"sessions_send {"session_id": "<id from sessions_list>", "message": "<text>", "mode": "queue" | "steer" (optional)}"#
            }
            SendTool::SendSessionMessage => {
                r#"send_session_message {"toSessionId": "<session id>", "message": "<text>", "urgent": false | true (optional)}"#
            }
        }
    }
}
