// A small ACP agent on the TypeScript SDK's experimental v2 draft (its unstable entry point), for the
// proxy's v2 tests (acp_plan_operations_v2.test.mjs): it answers initialize with protocol version 2,
// and once it has answered session/new it sends the session updates listed in the request's
// `_meta.plans`, in order (in v2, plans travel only as plan_update and plan_removed).
import { Readable, Writable } from 'node:stream';

import * as acp from '@agentclientprotocol/sdk/experimental/v2/unstable';

let sessions = 0;
const stream = acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
acp
  .agent({ name: 'sessiontodo-v2-test-agent' })
  .onRequest(acp.methods.agent.initialize, () => ({
    protocolVersion: acp.PROTOCOL_VERSION,
    info: { name: 'sessiontodo-v2-test-agent', version: '1.0.0' },
    capabilities: {},
  }))
  .onRequest(acp.methods.agent.session.new, ({ params, client }) => {
    const sessionId = `v2-${process.pid}-${++sessions}`;
    setImmediate(async () => {
      for (const update of params._meta?.plans ?? []) await client.notify(acp.methods.client.session.update, { sessionId, update });
    });
    return { sessionId };
  })
  .connect(stream);
