// The bundle's one stylesheet, injected once while the plugin is applied (removed on dispose). Colours follow
// the shell's theme variables where it has them (--dsw-alias-*), with fallbacks for a shell without.

export const CARD_ATTR = 'data-dsh-session-mail-card'

export const STYLE = [
  '[data-dsh-session-mail-card]{border:1px solid var(--dsm-accent,#7c6cf0);border-left-width:4px;border-radius:10px;padding:8px 12px;margin:4px 0;background:var(--dsm-bg,rgba(124,108,240,.06));max-width:100%;}',
  '.dsm-card-head{display:flex;flex-wrap:wrap;align-items:center;gap:6px;font-size:12px;color:var(--dsm-muted,#6b6b80);margin-bottom:6px;}',
  '.dsm-peer{font:inherit;font-weight:600;color:var(--dsm-accent-strong,#5b4bd6);background:none;border:0;padding:0 2px;cursor:pointer;text-decoration:underline;text-underline-offset:2px;border-radius:4px;}',
  '.dsm-peer:focus-visible,.dsm-btn:focus-visible,.dsm-choice input:focus-visible+span{outline:2px solid var(--dsm-accent-strong,#5b4bd6);outline-offset:2px;}',
  '.dsm-id{font-family:ui-monospace,monospace;font-size:11px;opacity:.8;}',
  '.dsm-chip{display:inline-block;border:1px solid currentColor;border-radius:999px;padding:0 6px;font-size:11px;line-height:16px;}',
  '.dsm-body{white-space:pre-wrap;word-break:break-word;font-size:14px;line-height:1.5;}',
  '.dsm-exact{margin-top:6px;font-size:12px;color:var(--dsm-muted,#6b6b80);}',
  '.dsm-exact pre{white-space:pre-wrap;word-break:break-word;margin:4px 0 0;font-size:12px;}',
  '.dsm-view{padding:16px 20px;font-size:13px;overflow:auto;}',
  '.dsm-view h2{font-size:15px;margin:0 0 10px;}',
  '.dsm-view h3{font-size:13px;margin:14px 0 6px;}',
  '.dsm-policy{display:flex;flex-wrap:wrap;gap:14px;align-items:center;border:0;padding:0;margin:0 0 8px;}',
  '.dsm-policy legend{font-weight:600;margin-bottom:6px;padding:0;}',
  '.dsm-choice{display:inline-flex;gap:4px;align-items:center;cursor:pointer;}',
  '.dsm-stop{display:flex;gap:6px;align-items:center;margin:6px 0;}',
  '.dsm-alert{border-radius:8px;padding:6px 10px;margin:6px 0;background:rgba(220,60,60,.1);color:#b42318;}',
  '.dsm-table{border-collapse:collapse;width:100%;}',
  '.dsm-table th,.dsm-table td{text-align:left;padding:4px 8px;border-bottom:1px solid var(--dsm-line,rgba(127,127,127,.25));vertical-align:top;}',
  '.dsm-table th{font-weight:600;font-size:12px;color:var(--dsm-muted,#6b6b80);}',
  '.dsm-held{border:1px dashed var(--dsm-accent,#7c6cf0);border-radius:8px;padding:8px;margin:6px 0;}',
  '.dsm-held pre{white-space:pre-wrap;margin:6px 0;font-size:12px;max-height:160px;overflow:auto;}',
  '.dsm-btn{font:inherit;border:1px solid var(--dsm-line,rgba(127,127,127,.5));border-radius:6px;padding:2px 10px;margin-right:6px;background:transparent;cursor:pointer;color:inherit;}',
  '.dsm-fate-landed{color:#067647;}.dsm-fate-held,.dsm-fate-waiting,.dsm-fate-queued,.dsm-fate-approved{color:#b54708;}.dsm-fate-rejected,.dsm-fate-refused{color:#b42318;}',
].join('\n')
