// Types of the dsh-session-mail plugin module (the cordis plugin shim).
import type { Schema } from '@deepseek-ai/schemastery'
import type { ConfigDefaults } from './binding'

/**
 * The plugin's Config. The keys the core reads, and their defaults, are the core's (`ConfigDefaults`, generated
 * from crates/core/src/config.rs into binding.d.ts); the shim adds its own keys, and narrows two strings to the
 * values its Schemastery Config accepts.
 */
export interface Config extends Omit<ConfigDefaults, 'defaultSendMode' | 'hostApi'> {
  enabled: boolean
  defaultSendMode: 'queue' | 'steer'
  hostApi: 'auto' | 'rc8' | 'v2'
  host: string
  port: number
  sendTools: 'both' | 'sessions_send' | 'send_session_message'
  idleNoticeMinutes: number
  overlapNotice: boolean
}

export declare const name: 'dsh-session-mail'
export declare const inject: Record<string, { required: boolean }>
export declare const Config: Schema<Partial<Config>, Config>
/** Registers the four tools on `ctx.tools` unless `config.enabled` is false. */
export declare function apply(ctx: unknown, config?: Partial<Config>): void
