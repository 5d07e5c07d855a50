// The pure parts: which message is agent mail, and what its text says (display only; the facts come from the
// ledger through the routes).

export const PREFIX = 'dsh-session-mail:'

export interface MessageSource { kind?: string; rpcId?: string; [k: string]: unknown }

/** Is this message one our plugin delivered? (seed 003: `data.source.rpcId` starts with the prefix, rc.8 and 0.1.2+ alike.) */
export function isAgentMail(source: unknown): boolean {
  if (source === null || typeof source !== 'object') return false
  const s = source as MessageSource
  return s.kind === 'user' && typeof s.rpcId === 'string' && s.rpcId.indexOf(PREFIX) === 0
}

export function textOf(content: unknown): string {
  if (!Array.isArray(content)) return ''
  const out: string[] = []
  for (const b of content) if (b && b.type === 'text' && typeof b.text === 'string') out.push(b.text)
  return out.join('\n')
}

/** The sender as the body's own header names it (seed 003 `From <id> ：`, seed 000 `from-session:`): display only. */
export function senderFromText(text: string): string | null {
  const m = /^From (session-[A-Za-z0-9_.-]+)/.exec(text) || /(?:^|\n)from-session: (session-[A-Za-z0-9_.-]+)/.exec(text)
  return m ? m[1] : null
}

/**
 * The message inside its header or frame (seed 003 `From <id> ：` line; seed 000 frame between
 * `--- message begins ---` and `--- message ends ---`), for the card's body. The exact delivered text
 * stays one click away (what the model received is never rewritten, only shown).
 */
export function bodyOf(text: string): string {
  const m = /^From session-[A-Za-z0-9_.-]+ ：\n/.exec(text)
  if (m) return text.slice(m[0].length)
  const begin = text.indexOf('--- message begins ---\n')
  const end = text.lastIndexOf('\n--- message ends ---')
  if (begin >= 0 && end > begin) return text.slice(begin + '--- message begins ---\n'.length, end)
  return text
}

/** What the agent reads for a picked session: its id, which the send tools take (seed 000 `session_id`). */
export function sessionMention(id: string, title?: string): string {
  return title && title !== id ? '@' + title + ' (session ' + id + ')' : '@session ' + id
}

export function shortId(id: unknown): string {
  const s = String(id || '')
  return s.length > 22 ? s.slice(0, 16) + '…' + s.slice(-4) : s
}
