// One error type for every refusal the installer reports: the message goes to stderr, the code is the exit code.
// Exit codes: 2 = bad usage / not a profile / bad --package value, 1 = any other failure.

export class InstallError extends Error {
  /**
   * @param {string} message - what went wrong and what to do about it
   * @param {1 | 2} exitCode
   */
  constructor(message, exitCode = 1) {
    super(message)
    this.name = 'InstallError'
    this.exitCode = exitCode
  }
}

export const usageError = message => new InstallError(message, 2)
