// An external A2A agent that is NOT an mcpv2 node, built only from
// @a2a-js/sdk 1.3.0's server side and express (pinned by package-lock.json).
// The Go tests run it to call it from mcpv2 (node/a2aclient, the "a2a"
// custom skill, mcpv2 call/card/ping, the agent registry).
//
//   node a2a-agent.mjs [--version 1.0|0.3] [--no-streaming] [--sign] [--name NAME] [--weather]
//
// It listens on 127.0.0.1:0 and prints one line, its base URL
// (http://127.0.0.1:PORT), on stdout once it listens; it runs until killed
// (or stdin closes). The card is at /.well-known/agent-card.json, the
// JSON-RPC endpoint at /a2a/jsonrpc.
//
//   --version 1.0 (default): the SDK's v1.0 server (card with
//       supportedInterfaces JSONRPC 1.0).
//   --version 0.3: the SDK's v0.3 compatibility layer
//       (compat/v0_3/server/express): a v0.3 card (url, preferredTransport,
//       protocolVersion 0.3.0) at /.well-known/agent-card.json and
//       /.well-known/agent.json, and message/send, message/stream, tasks/get.
//   --no-streaming: capabilities.streaming false.
//   --sign: the card is signed (the SDK's generateAgentCardSignature, an
//       Ed25519 key made at start, its public JWK in the protected header).
//   --weather: the card lists a fourth skill, weather (below), which the
//       orchestrator's heuristic planner routes "the weather in CITY" to.
//
// Skills (the message's metadata.skill picks one; else "echo"):
//   echo: completes with an artifact holding the message's text.
//   add:  reads a data part {a, b} and completes with an artifact holding
//         the data {"sum": a+b} and the text "a+b=sum".
//   ask:  the first turn goes input-required ("what is your name?"); the
//         next message on that task completes with "hello NAME".
//   weather (with --weather): reads the city from a data part {city} (else
//         the text) and completes with the data {"city", "temperature_c",
//         "conditions", "source": NAME} and the text "CITY: T °C, conditions
//         (NAME)"; fixed sample values, so a test sees which agent answered.
import { randomUUID, generateKeyPairSync } from 'node:crypto';
import express from 'express';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { legacyAgentCardRouter } from '@a2a-js/sdk/compat/v0_3/server/express';
import { Role, TaskState, generateAgentCardSignature } from '@a2a-js/sdk';

const argv = process.argv.slice(2);
const flag = (name) => argv.includes(name);
const value = (name, def) => { const i = argv.indexOf(name); return i >= 0 && i + 1 < argv.length ? argv[i + 1] : def; };
const version = value('--version', '1.0');
if (version !== '1.0' && version !== '0.3') { console.error(`--version ${version}: want 1.0 or 0.3`); process.exit(2); }
const name = value('--name', 'js-agent');

const text = (t) => ({ content: { $case: 'text', value: t }, metadata: undefined, filename: '', mediaType: 'text/plain' });
const data = (d) => ({ content: { $case: 'data', value: d }, metadata: undefined, filename: '', mediaType: 'application/json' });
const agentMessage = (ctx, parts) => ({
  messageId: randomUUID(), contextId: ctx.contextId, taskId: ctx.taskId, role: Role.ROLE_AGENT,
  parts, metadata: undefined, extensions: [], referenceTaskIds: [],
});
const status = (state, message) => ({ state, message, timestamp: new Date().toISOString() });

function textOf(msg) {
  return msg.parts.filter((p) => p.content?.$case === 'text').map((p) => p.content.value).join('\n');
}
function dataOf(msg) {
  const p = msg.parts.find((p) => p.content?.$case === 'data');
  return p ? p.content.value : undefined;
}

class Executor {
  async execute(ctx, bus) {
    const msg = ctx.userMessage;
    const skill = ctx.task?.metadata?.skill ?? msg.metadata?.skill ?? 'echo';
    const base = { id: ctx.taskId, contextId: ctx.contextId, artifacts: [], history: [msg], metadata: { skill } };
    // The first event is the task (a follow-up turn's too, working again).
    bus.publish(AgentEvent.task(ctx.task ? { ...ctx.task, status: status(TaskState.TASK_STATE_WORKING, undefined) }
      : { ...base, status: status(TaskState.TASK_STATE_SUBMITTED, undefined) }));
    bus.publish(AgentEvent.statusUpdate({ taskId: ctx.taskId, contextId: ctx.contextId, status: status(TaskState.TASK_STATE_WORKING, undefined), metadata: undefined }));
    await new Promise((r) => setTimeout(r, 20)); // some work, so that a poller sees "working"
    const artifact = (parts) => bus.publish(AgentEvent.artifactUpdate({
      taskId: ctx.taskId, contextId: ctx.contextId, append: false, lastChunk: true, metadata: undefined,
      artifact: { artifactId: randomUUID(), name: skill, description: '', parts, metadata: undefined, extensions: [] },
    }));
    const finish = (state, parts) => {
      bus.publish(AgentEvent.statusUpdate({ taskId: ctx.taskId, contextId: ctx.contextId, status: status(state, agentMessage(ctx, parts)), metadata: undefined }));
      bus.finished();
    };
    switch (skill) {
      case 'echo':
        artifact([text(textOf(msg))]);
        return finish(TaskState.TASK_STATE_COMPLETED, [text(textOf(msg))]);
      case 'add': {
        const d = dataOf(msg) ?? {};
        if (typeof d.a !== 'number' || typeof d.b !== 'number') {
          return finish(TaskState.TASK_STATE_FAILED, [text('add: want a data part {"a": number, "b": number}')]);
        }
        const sum = d.a + d.b;
        artifact([data({ sum }), text(`${d.a}+${d.b}=${sum}`)]);
        return finish(TaskState.TASK_STATE_COMPLETED, [text(`${d.a}+${d.b}=${sum}`)]);
      }
      case 'weather': {
        if (!flag('--weather')) return finish(TaskState.TASK_STATE_REJECTED, [text(`no skill ${skill}`)]);
        const city = String(dataOf(msg)?.city ?? textOf(msg)).trim();
        if (city === '') return finish(TaskState.TASK_STATE_FAILED, [text('weather: want a data part {"city": string} or a text')]);
        const report = { city, temperature_c: 19, conditions: 'light rain', source: name };
        const line = `${city}: ${report.temperature_c} °C, ${report.conditions} (${name})`;
        artifact([data(report), text(line)]);
        return finish(TaskState.TASK_STATE_COMPLETED, [text(line)]);
      }
      case 'ask':
        if (!ctx.task) return finish(TaskState.TASK_STATE_INPUT_REQUIRED, [text('what is your name?')]);
        return finish(TaskState.TASK_STATE_COMPLETED, [text(`hello ${textOf(msg)}`)]);
      default:
        return finish(TaskState.TASK_STATE_REJECTED, [text(`no skill ${skill}`)]);
    }
  }
  async cancelTask() {}
}

const app = express();
const server = app.listen(0, '127.0.0.1', async () => {
  const base = `http://127.0.0.1:${server.address().port}`;
  const skill = (id, description, tags, examples) => ({ id, name: id, description, tags, examples, inputModes: [], outputModes: [], securityRequirements: [] });
  const card = {
    name, description: 'an A2A agent of @a2a-js/sdk 1.3.0 (mcpv2 tests)', version: '1.0.0',
    supportedInterfaces: [{ url: `${base}/a2a/jsonrpc`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: version }],
    provider: undefined, capabilities: { streaming: !flag('--no-streaming'), pushNotifications: false, extensions: [] },
    securitySchemes: {}, securityRequirements: [], defaultInputModes: ['text/plain', 'application/json'], defaultOutputModes: ['text/plain', 'application/json'],
    skills: [
      skill('echo', 'answers the text it is sent', ['echo', 'test'], ['hello']),
      skill('add', 'adds the numbers a and b of a data part', ['math'], ['{"a":1,"b":2}']),
      skill('ask', 'asks for a name (input-required), then greets it', ['multi-turn'], []),
      ...(flag('--weather') ? [skill('weather', 'current weather of a city (sample values)', ['weather', 'forecast'], ['{"city":"Tokyo"}'])] : []),
    ],
    signatures: [],
  };
  let signer;
  if (flag('--sign')) {
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    const jwk = publicKey.export({ format: 'jwk' });
    signer = generateAgentCardSignature(privateKey, { alg: 'EdDSA', typ: 'JOSE', kid: 'test-key', jwk });
  }
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new Executor(), undefined, undefined, undefined, undefined, signer);
  if (version === '0.3') {
    for (const path of ['/.well-known/agent-card.json', '/.well-known/agent.json']) {
      app.use(path, legacyAgentCardRouter({ agentCardProvider: handler }));
    }
    app.use('/a2a/jsonrpc', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, legacyCompat: { enabled: true } }));
  } else {
    app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: handler }));
    app.use('/a2a/jsonrpc', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  }
  console.log(base);
});
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
process.on('SIGTERM', () => process.exit(0));
