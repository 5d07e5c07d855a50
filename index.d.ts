// Types of the dsh-session-mail plugin module (the cordis plugin shim).
import type { Schema } from '@deepseek-ai/schemastery'

export interface Config {
  enabled: boolean
  frameMessages: boolean
  maxSendChars: number
  defaultSendMode: 'queue' | 'steer'
  allowResume: boolean
  maxListResults: number
  maxReadMessages: number
  maxMessageChars: number
  includeInjectedByDefault: boolean
  hostApi: 'auto' | 'rc8' | 'v2'
  host: string
  port: number
  connectTimeoutMs: number
  requestTimeoutMs: number
  budgetWindowSecs: number
  budgetPerPair: number
  budgetPerSender: number
  urgentReserve: number
  maxStackedPerSender: number
  maxRelayHops: number
  sendTools: 'both' | 'sessions_send' | 'send_session_message'
  idleNoticeMinutes: number
  overlapNotice: boolean
}

export declare const name: 'dsh-session-mail'
export declare const inject: Record<string, { required: boolean }>
export declare const Config: Schema<Partial<Config>, Config>
/** The Config keys the Rust core reads (test/config-defaults.test.mjs checks them against the core). */
export declare const CORE_CONFIG_KEYS: readonly string[]
/** Registers the four tools on `ctx.tools` unless `config.enabled` is false. */
export declare function apply(ctx: unknown, config?: Partial<Config>): void
