import { config } from 'zod/mini';
import en from 'zod/v4/locales/en.js';

/**
 * zod's English messages for every schema in the process. Classic `zod` installs them on import;
 * `zod/mini` (which the Lambda bundles use, for size) installs none, and its messages would be a bare
 * "Invalid input". Field errors in blocked reasons, 4xx bodies and audit failures quote these messages,
 * so every module whose validation messages reach people imports this once, for its effect.
 */
config(en());
