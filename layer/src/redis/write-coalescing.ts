import type { Redis } from 'ioredis';

/**
 * The most commands one write carries. Without a cap a turn's every command
 * waited for the turn's last: Redis idled while the client prepared them and
 * the client while Redis ran them (at 128 in flight over 100k keys,
 * throughput −8 to −14 % against each command written alone, p50 +8 to
 * +22 %); at 16 both stay busy (+33 to +51 %, p50 −33 %: docs/design.md).
 */
export const COMMANDS_PER_WRITE = 16;

/**
 * Commands sent on a connection in one turn while others are in flight on it
 * go out together, up to COMMANDS_PER_WRITE per write. Each write is a
 * syscall (here ~5-8 µs, most of a check's client CPU) and costs Redis a
 * read: a process with many checks in flight on one connection (the local
 * gateway, a long-lived consumer, a shadow check sent beside its enforced
 * one) paid both per command. The first command of a batch corks the
 * connection's socket; the batch's COMMANDS_PER_WRITE-th command (the first
 * counted), or the end of the tick it was sent in (`process.nextTick`: after
 * the promise continuations it was sent from; sent straight from a timer or
 * I/O callback, after that callback and before its microtasks), uncorks it,
 * and Node writes the batch in one `writev`. A command sent alone (the
 * Lambda shape: one check in flight per container) finds nothing in flight
 * and is written at once: no tick, no wait (only a command past its deadline
 * still unanswered makes the next one wait for its tick).
 *
 * Unlike ioredis's `enableAutoPipelining` (measured in docs/design.md), no
 * command waits for a later turn of the event loop: only the bytes move,
 * before it (so a Lambda frozen after its response has them sent); the
 * command queue, its order, redirections, reconnects and errors are
 * ioredis's as before. (Over TLS Node already holds what is written while a
 * write is under way, and sends it together past the cap.)
 */
export function coalesceWrites(connection: Redis): void {
  const send = connection.sendCommand;
  let corked: Redis['stream'] | undefined;
  let batched = 0;
  const flush = () => {
    corked?.uncork();
    corked = undefined;
  };
  connection.sendCommand = function (this: Redis, ...args: Parameters<Redis['sendCommand']>) {
    // (a second argument is a pipeline's or a transaction's stream: it writes there)
    if (corked === undefined && args[1] === undefined && this.commandQueue.length > 0 && this.stream !== undefined) {
      corked = this.stream;
      corked.cork();
      batched = 0;
      process.nextTick(flush);
    }
    const sent = send.apply(this, args);
    if (corked !== undefined && ++batched === COMMANDS_PER_WRITE) flush();
    return sent;
  };
}
