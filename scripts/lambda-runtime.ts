/**
 * A stand-in for Lambda's Node.js runtime bootstrap, for one function in a
 * child process (test/support/synthesized-app.ts forks it): loads the
 * handler the template names (`<module>.<export>`, the module `.mjs`, `.js`
 * or `.cjs` in the task folder, its working directory), reports the init's
 * outcome, then runs each invocation it is sent over IPC with a context
 * whose remaining time counts down from the function's timeout.
 *
 *   node --import scripts/lambda-resolve.ts scripts/lambda-runtime.ts <Handler> <timeout seconds>
 */
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

type Handler = (event: unknown, context: unknown) => Promise<unknown>;
interface Invocation {
  readonly id: number;
  readonly event: unknown;
}

const send = (message: unknown) => process.send?.(message);
const describe = (error: unknown) => ({
  name: error instanceof Error ? error.name : 'Error',
  message: error instanceof Error ? error.message : String(error),
});

const spec = process.argv[2] ?? '';
const dot = spec.lastIndexOf('.');
const [moduleName, exportName] = [spec.slice(0, dot), spec.slice(dot + 1)];
// the function's timeout, as the Runtime API's deadline gives it (not an environment variable in Lambda)
const timeoutMs = Number(process.argv[3] ?? 3) * 1000;
let handler: Handler | undefined;
let initError: { name: string; message: string } | undefined;
try {
  const file = ['.mjs', '.js', '.cjs'].map((ext) => join(process.cwd(), moduleName + ext)).find((f) => existsSync(f));
  if (!file)
    throw Object.assign(new Error(`Cannot find module '${moduleName}'`), { name: 'Runtime.ImportModuleError' });
  const loaded = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  if (typeof loaded[exportName] !== 'function') {
    throw Object.assign(new Error(`${spec} is undefined or not exported`), { name: 'Runtime.HandlerNotFound' });
  }
  handler = loaded[exportName] as Handler;
} catch (error) {
  initError = describe(error);
}
send({ ready: true, initError });

process.on('message', async ({ id, event }: Invocation) => {
  if (!handler) return send({ id, error: initError });
  const deadline = Date.now() + timeoutMs;
  const context = {
    functionName: process.env.AWS_LAMBDA_FUNCTION_NAME,
    memoryLimitInMB: process.env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE,
    awsRequestId: randomUUID(),
    invokedFunctionArn: `arn:aws:lambda:${process.env.AWS_REGION}:000000000000:function:${process.env.AWS_LAMBDA_FUNCTION_NAME}`,
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
  };
  try {
    send({ id, result: await handler(event, context) });
  } catch (error) {
    send({ id, error: describe(error) });
  }
});
