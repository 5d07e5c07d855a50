// The one `require('react')` of the bundle: React is the shell's platform module (rc.8
// packages/client/web/src/platform.ts PLATFORM_MODULES), an external here, never bundled. Every file takes
// React from this module so the built factory asks the loader for it exactly once.
import * as ReactNs from 'react'

export const React = ReactNs
export const h = ReactNs.createElement
export const Fragment = ReactNs.Fragment
export const { useState, useEffect, useCallback, useRef, useMemo } = ReactNs
