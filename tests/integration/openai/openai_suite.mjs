// The official openai Node SDK against tern-gateway. Started by test_openai_sdk.c, which sets
//   GW_FAKE_URL   gateway -> scheduler -> worker --engine fake (API key GW_API_KEY)
//   GW_TINY_URL   gateway -> scheduler -> worker --engine cpu, tiny random model
//   GW_SCRIPT_URL gateway -> tern-fake-sched (the prompt's [[emit]]TEXT[[/emit]] is the output)
//   GW_MAX_MODEL_LEN the workers' max_model_len
// Every check compares against something independent of the code path under test: a
// non-streamed answer vs its streamed twin, a scripted model text vs its parsed fields, a prefix
// of an unstopped answer vs the stopped one. Exit 0 when every test passed.
import assert from 'node:assert/strict';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const src = process.env.TERN_SOURCE_DIR || process.cwd();
const sdk = await import(pathToFileURL(path.join(src, '.deps/node_modules/openai/index.mjs')).href);
const OpenAI = sdk.default;

const KEY = process.env.GW_API_KEY;
const MML = Number(process.env.GW_MAX_MODEL_LEN || 512);
const MODEL = 'qwen3.6-35b-a3b';
const opts = { maxRetries: 0, timeout: 30000 };
const fake = new OpenAI({ baseURL: process.env.GW_FAKE_URL + '/v1', apiKey: KEY, ...opts });
const tiny = new OpenAI({ baseURL: process.env.GW_TINY_URL + '/v1', apiKey: 'unused', ...opts });
const script = new OpenAI({ baseURL: process.env.GW_SCRIPT_URL + '/v1', apiKey: 'unused', ...opts });

const tests = [];
const test = (name, fn) => tests.push({ name, fn });

// ---- helpers ----

const user = (content) => [{ role: 'user', content }];
const emit = (text) => user(`Please answer. [[emit]]${text}[[/emit]]`);

/* Drain a raw stream: every chunk checked for the OpenAI chunk shape; returns the pieces. */
async function collect(stream, kind = 'chat') {
  const r = { content: '', reasoning: '', reasoning2: '', tools: [], finish: [], usage: [],
              roles: 0, ids: new Set(), models: new Set(), created: new Set(), chunks: 0,
              usageLast: false };
  for await (const c of stream) {
    r.chunks++;
    r.ids.add(c.id);
    r.models.add(c.model);
    r.created.add(c.created);
    assert.equal(c.object, kind === 'chat' ? 'chat.completion.chunk' : 'text_completion');
    r.usageLast = false;
    if (c.usage) {
      r.usage.push(c.usage);
      assert.deepEqual(c.choices, [], 'the usage chunk has choices: []');
      r.usageLast = true;
      continue;
    }
    assert.equal(c.choices.length, 1);
    const ch = c.choices[0];
    assert.equal(ch.index, 0);
    if (ch.finish_reason) r.finish.push(ch.finish_reason);
    if (kind !== 'chat') {
      r.content += ch.text ?? '';
      continue;
    }
    const d = ch.delta;
    if (d.role) { r.roles++; assert.equal(d.role, 'assistant'); }
    if (d.content) r.content += d.content;
    if (d.reasoning_content) r.reasoning += d.reasoning_content;
    if (d.reasoning) r.reasoning2 += d.reasoning;
    for (const tc of d.tool_calls ?? []) {
      assert.equal(typeof tc.index, 'number');
      if (!r.tools[tc.index]) {
        assert.ok(tc.id, 'the first delta of a tool call carries its id');
        assert.equal(tc.type, 'function');
        assert.ok(tc.function?.name, 'the first delta of a tool call carries the name');
        r.tools[tc.index] = { id: tc.id, name: tc.function.name, arguments: '' };
      }
      r.tools[tc.index].arguments += tc.function?.arguments ?? '';
    }
  }
  assert.equal(r.ids.size, 1, 'same id on every chunk');
  assert.equal(r.models.size, 1, 'same model on every chunk');
  assert.equal(r.created.size, 1, 'same created on every chunk');
  assert.equal(r.finish.length, 1, 'exactly one finish_reason');
  if (kind === 'chat') assert.equal(r.roles, 1, 'the role comes once');
  if (kind === 'chat') assert.equal(r.reasoning, r.reasoning2, 'reasoning == reasoning_content');
  return r;
}

async function expectError(promise, status, Cls, text) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof Cls, `want ${Cls.name}, got ${e.constructor.name}: ${e.message}`);
    assert.equal(e.status, status);
    assert.ok(e.message.includes(text), `message "${e.message}" lacks "${text}"`);
    return e;
  }
  assert.fail(`expected a ${status} error`);
}

// ---- models ----

test('models.list and retrieve', async () => {
  const page = await fake.models.list();
  assert.equal(page.data.length, 1);
  assert.equal(page.data[0].id, MODEL);
  assert.equal(page.data[0].object, 'model');
  assert.equal(page.data[0].max_model_len, MML);
  const m = await fake.models.retrieve(MODEL);
  assert.equal(m.id, MODEL);
  // created: the gateway's start (a real Unix time, the same on every call)
  const now = Date.now() / 1000;
  assert.ok(page.data[0].created > now - 600 && page.data[0].created <= now + 1,
            `created ${page.data[0].created}`);
  assert.equal(m.created, page.data[0].created);
  const e = await expectError(fake.models.retrieve('no-such-model'), 404, OpenAI.NotFoundError,
                              'does not exist');
  assert.equal(e.code, 'model_not_found');
});

// ---- errors: our message, the right class ----

test('bad API key -> 401 AuthenticationError with our message', async () => {
  const bad = new OpenAI({ baseURL: process.env.GW_FAKE_URL + '/v1', apiKey: 'wrong', ...opts });
  const e = await expectError(bad.chat.completions.create({ model: MODEL, messages: user('hi') }),
                              401, OpenAI.AuthenticationError, 'Incorrect or missing API key');
  assert.equal(e.code, 'invalid_api_key');
  await expectError(bad.models.list(), 401, OpenAI.AuthenticationError, 'API key');
});

test('context too long -> 400 "maximum context length" (chat, completions, stream)', async () => {
  for (const stream of [false, true]) {
    const e = await expectError(
      fake.chat.completions.create({ model: MODEL, messages: user('hi'), max_tokens: MML, stream }),
      400, OpenAI.BadRequestError, `maximum context length is ${MML} tokens`);
    assert.equal(e.code, 'context_length_exceeded');
    assert.equal(e.param, 'messages');
  }
  const long = 'word '.repeat(MML + 10);
  const e = await expectError(fake.completions.create({ model: MODEL, prompt: long, max_tokens: 4 }),
                              400, OpenAI.BadRequestError, 'maximum context length');
  assert.equal(e.param, 'prompt');
});

test('invalid parameters -> 400 with param', async () => {
  let e = await expectError(
    fake.chat.completions.create({ model: MODEL, messages: user('hi'), temperature: 3 }),
    400, OpenAI.BadRequestError, "'temperature' must be in");
  assert.equal(e.param, 'temperature');
  e = await expectError(fake.chat.completions.create({ model: MODEL, messages: user('hi'), n: 9 }),
                        400, OpenAI.BadRequestError, "'n' must be in [1, 8]");
  assert.equal(e.param, 'n');
  e = await expectError(fake.chat.completions.create({ model: 'gpt-4o', messages: user('hi') }),
                        404, OpenAI.NotFoundError, "The model 'gpt-4o' does not exist");
  assert.equal(e.code, 'model_not_found');
  e = await expectError(fake.chat.completions.create({ model: MODEL, messages: [] }),
                        400, OpenAI.BadRequestError, 'messages');
  e = await expectError(fake.chat.completions.create({ model: MODEL, messages: user('hi'),
    response_format: { type: 'json_schema',
                       json_schema: { name: 'x', schema: { type: 'string', pattern: '^a' } } } }),
                        400, OpenAI.BadRequestError, "unsupported keyword 'pattern'");
  assert.equal(e.param, 'response_format');
  const r = await fake.chat.completions.create({ model: MODEL, messages: user('hi'),
                                                 max_completion_tokens: 3 });
  assert.equal(r.usage.completion_tokens, 3, 'max_completion_tokens is honoured');
});

test('x-request-id round trip', async () => {
  const rid = 'client-req-' + Date.now();
  const { data, response, request_id } = await fake.chat.completions
    .create({ model: MODEL, messages: user('hi'), max_tokens: 2 }, { headers: { 'x-request-id': rid } })
    .withResponse();
  assert.equal(response.headers.get('x-request-id'), rid);
  assert.equal(request_id, rid);
  assert.equal(data._request_id, rid);
  const s = await fake.chat.completions
    .create({ model: MODEL, messages: user('hi'), max_tokens: 2, stream: true },
            { headers: { 'x-request-id': rid + '-s' } })
    .withResponse();
  assert.equal(s.response.headers.get('x-request-id'), rid + '-s');
  await collect(s.data);
  // errors carry it too
  try {
    await fake.chat.completions.create({ model: MODEL, messages: user('hi'), temperature: 9 },
                                       { headers: { 'x-request-id': rid + '-e' } });
    assert.fail('no error');
  } catch (err) {
    assert.equal(err.requestID, rid + '-e');
  }
});

// ---- streamed == non-streamed, usage, on the fake engine and the tiny model ----

for (const [name, client] of [['fake', fake], ['tiny', tiny]]) {
  test(`${name}: chat streamed == non-streamed (greedy), usage only when asked`, async () => {
    const req = { model: MODEL, messages: user('Tell me a story.'), max_tokens: 12, temperature: 0 };
    const full = await client.chat.completions.create(req);
    const c = full.choices[0];
    assert.equal(full.object, 'chat.completion');
    assert.equal(c.finish_reason, 'length');
    assert.equal(full.usage.completion_tokens, 12);
    assert.equal(full.usage.total_tokens, full.usage.prompt_tokens + 12);
    assert.ok(full.usage.prompt_tokens > 5);
    const plain = await collect(await client.chat.completions.create({ ...req, stream: true }));
    assert.equal(plain.usage.length, 0, 'no usage chunk without include_usage');
    assert.equal(plain.content, c.message.content ?? '');
    assert.equal(plain.reasoning, c.message.reasoning_content ?? '');
    assert.deepEqual(plain.finish, ['length']);
    const withUsage = await collect(await client.chat.completions.create(
      { ...req, stream: true, stream_options: { include_usage: true } }));
    assert.equal(withUsage.usage.length, 1, 'exactly one usage chunk');
    assert.ok(withUsage.usageLast, 'the usage chunk is the last one');
    assert.deepEqual(withUsage.usage[0], full.usage);
    assert.equal(withUsage.content, plain.content);
    // the .stream() helper (role, finish_reason, usage merge need the right shapes)
    const helper = client.chat.completions.stream({ ...req, stream_options: { include_usage: true } });
    const fin = await helper.finalChatCompletion();
    assert.equal(fin.choices[0].message.content ?? '', c.message.content ?? '');
    assert.equal(fin.choices[0].finish_reason, 'length');
    assert.deepEqual(fin.usage, full.usage);
  });

  test(`${name}: logprobs streamed == non-streamed`, async () => {
    const req = { model: MODEL, messages: user('Count.'), max_tokens: 6, temperature: 0,
                  logprobs: true, top_logprobs: 2 };
    const full = await client.chat.completions.create(req);
    const lp = full.choices[0].logprobs.content;
    assert.equal(lp.length, 6, 'one entry per completion token');
    for (const t of lp) {
      assert.ok(t.logprob <= 0);
      assert.ok(Array.isArray(t.bytes));
      assert.ok(t.top_logprobs.length <= 2);
    }
    if (!lp.some((t) => t.token.includes('\uFFFD'))) // a token that splits a character shows U+FFFD
      assert.equal(lp.map((t) => t.token).join(''), full.choices[0].message.content ?? '');
    const got = [];
    for await (const c of await client.chat.completions.create({ ...req, stream: true }))
      for (const t of c.choices[0]?.logprobs?.content ?? []) got.push(t);
    assert.deepEqual(got.map((t) => [t.token, t.logprob]), lp.map((t) => [t.token, t.logprob]));
  });

  test(`${name}: completions streamed == non-streamed`, async () => {
    const req = { model: MODEL, prompt: 'Once upon a time', max_tokens: 10, temperature: 0 };
    const full = await client.completions.create(req);
    assert.equal(full.object, 'text_completion');
    assert.equal(full.choices[0].finish_reason, 'length');
    assert.equal(full.usage.completion_tokens, 10);
    const s = await collect(await client.completions.create(
      { ...req, stream: true, stream_options: { include_usage: true } }), 'completion');
    assert.equal(s.content, full.choices[0].text);
    assert.deepEqual(s.usage, [full.usage]);
  });

  test(`${name}: stop string cuts the answer where the unstopped one has it`, async () => {
    const req = { model: MODEL, messages: user('Say something.'), max_tokens: 16, temperature: 0 };
    const full = (await client.chat.completions.create(req)).choices[0].message.content;
    const cps = Array.from(full);
    assert.ok(cps.length >= 8, `answer too short to cut: ${JSON.stringify(full)}`);
    const stop = cps.slice(4, 6).join('');
    const want = full.slice(0, full.indexOf(stop));
    const r = await client.chat.completions.create({ ...req, stop: [stop] });
    assert.equal(r.choices[0].message.content, want);
    assert.equal(r.choices[0].finish_reason, 'stop');
    const s = await collect(await client.chat.completions.create({ ...req, stop, stream: true }));
    assert.equal(s.content, want);
    assert.deepEqual(s.finish, ['stop']);
  });

  test(`${name}: same seed -> same output at temperature 1`, async () => {
    const req = { model: MODEL, messages: user('Pick words.'), max_tokens: 12, temperature: 1.0,
                  top_p: 1.0 };
    const a = await client.chat.completions.create({ ...req, seed: 1234 });
    const b = await client.chat.completions.create({ ...req, seed: 1234 });
    assert.equal(a.choices[0].message.content, b.choices[0].message.content);
    const s = await collect(await client.chat.completions.create({ ...req, seed: 1234, stream: true }));
    assert.equal(s.content, a.choices[0].message.content);
    if (name === 'tiny') {
      // a random model samples near-uniformly over 151k ids: other seeds must differ somewhere
      const outs = new Set([a.choices[0].message.content]);
      for (const seed of [1, 2, 3])
        outs.add((await client.chat.completions.create({ ...req, seed })).choices[0].message.content);
      assert.ok(outs.size >= 3, 'different seeds give different samples');
    }
  });
}

// ---- request surface: logit_bias, stop_token_ids, min_tokens (issue 21) ----

// The fake engine's model: after token t comes (31 t + 7) mod vocab (a logit spike of 30 over
// zeros), so every expectation below is computed here, independently of the server.
const FAKE_VOCAB = 151936;
const fakeNext = (t) => (t * 31 + 7) % FAKE_VOCAB;

test('fake: logit_bias -100 removes the token the model would pick; +100 forces one', async () => {
  const req = { model: MODEL, prompt: [100], max_tokens: 2, temperature: 0 };
  const t1 = fakeNext(100);
  const plain = await fake.completions.create(req);
  // without t1 the logits tie at 0: the lowest id (0, "!") wins, then fakeNext(0) = 7 ("(")
  const biased = await fake.completions.create({ ...req, logit_bias: { [t1]: -100 } });
  assert.equal(biased.choices[0].text, '!(');
  assert.notEqual(plain.choices[0].text, biased.choices[0].text);
  const s = await collect(await fake.completions.create(
    { ...req, logit_bias: { [t1]: -100 }, stream: true }), 'completion');
  assert.equal(s.content, '!(');
  const forced = await fake.completions.create({ ...req, max_tokens: 1, logit_bias: { 7: 100 } });
  assert.equal(forced.choices[0].text, '(');
  // chat too: the bias holds at every step, so the token never appears
  const chat = await fake.chat.completions.create({ model: MODEL, messages: user('hi'),
    max_tokens: 1, temperature: 0, logit_bias: { 0: 100 } });
  assert.equal(chat.choices[0].message.content, '!');
  await expectError(fake.completions.create({ ...req, logit_bias: { 999999: 1 } }), 400,
                    OpenAI.BadRequestError, 'outside the vocabulary');
});

test('fake: stop_token_ids end the answer; min_tokens masks them (and EOS) until reached', async () => {
  const t1 = fakeNext(100), t2 = fakeNext(t1);
  const req = { model: MODEL, prompt: [100], max_tokens: 4, temperature: 0 };
  let r = await fake.completions.create({ ...req, stop_token_ids: [t2] });
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.equal(r.usage.completion_tokens, 2);
  r = await fake.completions.create({ ...req, stop_token_ids: [t1] });
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.equal(r.usage.completion_tokens, 1);
  // masked for the first two tokens: the lowest id (0), then 7, 224, 6951: never t1
  r = await fake.completions.create({ ...req, stop_token_ids: [t1], min_tokens: 2 });
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 4);
  assert.ok(r.choices[0].text.startsWith('!('), JSON.stringify(r.choices[0].text));
  const s = await collect(await fake.chat.completions.create({ model: MODEL, messages: user('hi'),
    max_tokens: 4, temperature: 0, stop_token_ids: [t1], min_tokens: 2,
    stream: true, stream_options: { include_usage: true } }));
  assert.equal(s.usage[0].completion_tokens, 4);
  await expectError(fake.completions.create({ ...req, min_tokens: 5 }), 400,
                    OpenAI.BadRequestError, 'min_tokens');
});

test('fake: text_offset counts characters, not UTF-8 bytes', async () => {
  // 108386 is "你好" (2 characters, 6 bytes); a +100 bias makes it every token
  const r = await fake.completions.create({ model: MODEL, prompt: [100], max_tokens: 3,
    temperature: 0, logprobs: 0, logit_bias: { 108386: 100 } });
  const lp = r.choices[0].logprobs;
  assert.equal(r.choices[0].text, '你好你好你好');
  assert.deepEqual(lp.tokens, ['你好', '你好', '你好']);
  assert.deepEqual(lp.text_offset, [0, 2, 4]);
  let got = [];
  for await (const c of await fake.completions.create({ model: MODEL, prompt: [100], max_tokens: 3,
    temperature: 0, logprobs: 0, logit_bias: { 108386: 100 }, stream: true }))
    got = got.concat(c.choices[0]?.logprobs?.text_offset ?? []);
  assert.deepEqual(got, [0, 2, 4]);
});

test('stop_reason: the stop token id, the stop string, null for length / EOS', async () => {
  const t2 = fakeNext(fakeNext(100));
  const req = { model: MODEL, prompt: [100], max_tokens: 4, temperature: 0 };
  let r = await fake.completions.create({ ...req, stop_token_ids: [t2] });
  assert.equal(r.choices[0].stop_reason, t2);
  r = await fake.completions.create(req);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.choices[0].stop_reason, null);
  // scripted model: a stop string, then its natural end (EOS)
  const sreq = { model: MODEL, messages: emit('Hello STOP world') };
  r = await script.chat.completions.create({ ...sreq, stop: ['STOP'] });
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.equal(r.choices[0].stop_reason, 'STOP');
  r = await script.chat.completions.create(sreq);
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.equal(r.choices[0].stop_reason, null);
  const last = [];
  for await (const c of await script.chat.completions.create({ ...sreq, stop: ['STOP'], stream: true }))
    if (c.choices[0]?.finish_reason) last.push(c.choices[0]);
  assert.equal(last.length, 1);
  assert.equal(last[0].stop_reason, 'STOP');
  // min_tokens also holds stop strings back (as vLLM): the first STOP is within 4 tokens
  const words = 'STOP' + ' word'.repeat(20) + ' STOP tail';
  r = await script.chat.completions.create({ model: MODEL, messages: emit(words), stop: ['STOP'] });
  assert.equal(r.choices[0].message.content, '');
  r = await script.chat.completions.create({ model: MODEL, messages: emit(words), stop: ['STOP'],
                                             min_tokens: 4 });
  assert.equal(r.choices[0].message.content, 'STOP' + ' word'.repeat(20) + ' ');
  assert.equal(r.choices[0].stop_reason, 'STOP');
  const fs = [];
  for await (const c of await fake.completions.create({ ...req, stop_token_ids: [t2], stream: true }))
    if (c.choices[0]?.finish_reason) fs.push(c.choices[0]);
  assert.equal(fs[0].stop_reason, t2);
});

test('script: parallel_tool_calls false -> only the first tool call, streamed and not', async () => {
  const req = { model: MODEL, messages: emit(TOOL_TEXT), tools: TOOLS, parallel_tool_calls: false };
  const full = await script.chat.completions.create(req);
  const tc = full.choices[0].message.tool_calls;
  assert.equal(tc.length, 1);
  assert.equal(tc[0].function.name, 'get_weather');
  assert.equal(full.choices[0].finish_reason, 'tool_calls');
  const s = await collect(await script.chat.completions.create({ ...req, stream: true }));
  assert.equal(s.tools.length, 1);
  assert.equal(s.tools[0].name, 'get_weather');
  const both = await script.chat.completions.create({ ...req, parallel_tool_calls: true });
  assert.equal(both.choices[0].message.tool_calls.length, 2);
});

// ---- n > 1: independent choices ----

/* Drain a raw stream of n choices: per index its text, finish reasons, role count. */
async function collectN(stream, n, kind = 'chat') {
  const r = { text: Array(n).fill(''), finish: Array.from({ length: n }, () => []),
              roles: Array(n).fill(0), usage: [], ids: new Set() };
  for await (const c of stream) {
    r.ids.add(c.id);
    if (c.usage) { r.usage.push(c.usage); assert.deepEqual(c.choices, []); continue; }
    for (const ch of c.choices) {
      assert.ok(ch.index >= 0 && ch.index < n, `index ${ch.index}`);
      if (ch.finish_reason) r.finish[ch.index].push(ch.finish_reason);
      if (kind !== 'chat') { r.text[ch.index] += ch.text ?? ''; continue; }
      if (ch.delta.role) r.roles[ch.index]++;
      r.text[ch.index] += ch.delta.content ?? '';
    }
  }
  assert.equal(r.ids.size, 1);
  for (let i = 0; i < n; i++) assert.equal(r.finish[i].length, 1, `one finish_reason for ${i}`);
  if (kind === 'chat') assert.deepEqual(r.roles, Array(n).fill(1), 'each choice gets its role once');
  return r;
}

test('fake: n = 3 greedy -> three equal choices, usage counts them all, streamed == not', async () => {
  const req = { model: MODEL, messages: user('Tell me.'), max_tokens: 5, temperature: 0, n: 3 };
  const full = await fake.chat.completions.create(req);
  assert.deepEqual(full.choices.map((c) => c.index), [0, 1, 2]);
  const texts = full.choices.map((c) => c.message.content);
  assert.equal(new Set(texts).size, 1, 'greedy choices are equal');
  assert.equal(full.usage.completion_tokens, 15);
  const one = await fake.chat.completions.create({ ...req, n: 1 });
  assert.equal(full.usage.prompt_tokens, one.usage.prompt_tokens, 'the prompt counts once');
  assert.equal(texts[0], one.choices[0].message.content);
  const s = await collectN(await fake.chat.completions.create(
    { ...req, stream: true, stream_options: { include_usage: true } }), 3);
  assert.deepEqual(s.text, texts);
  assert.deepEqual(s.usage, [full.usage]);
  const c = await fake.completions.create({ model: MODEL, prompt: [100], max_tokens: 2,
                                            temperature: 0, n: 2 });
  assert.deepEqual(c.choices.map((x) => x.index), [0, 1]);
  assert.equal(c.choices[0].text, c.choices[1].text);
  assert.equal(c.usage.completion_tokens, 4);
  const lp = await fake.chat.completions.create({ ...req, logprobs: true, top_logprobs: 1 });
  for (const ch of lp.choices) assert.equal(ch.logprobs.content.length, 5, 'logprobs per choice');
  const fin = await fake.chat.completions.stream({ ...req, n: 2 }).finalChatCompletion();
  assert.equal(fin.choices.length, 2);
  assert.equal(fin.choices[1].message.content, texts[0]);
});

test('script: n = 2 -> each choice parses its own tool calls, streamed and not', async () => {
  const req = { model: MODEL, messages: emit(TOOL_TEXT), tools: TOOLS, n: 2 };
  const full = await script.chat.completions.create(req);
  assert.equal(full.choices.length, 2);
  for (const ch of full.choices) {
    assert.equal(ch.finish_reason, 'tool_calls');
    assert.deepEqual(ch.message.tool_calls.map((t) => t.function.name), ['get_weather', 'get_time']);
  }
  const fin = await script.chat.completions.stream(req).finalChatCompletion();
  for (const ch of fin.choices)
    assert.deepEqual(JSON.parse(ch.message.tool_calls[0].function.arguments), { city: 'Paris', days: 3 });
});

test('tiny: n = 3 sampled -> independent sequences (choice i == n = 1 with seed + i)', async () => {
  const req = { model: MODEL, messages: user('Pick words.'), max_tokens: 8, temperature: 1,
                top_p: 1, top_k: -1, seed: 70 };
  const full = await tiny.chat.completions.create({ ...req, n: 3 });
  const texts = full.choices.map((c) => c.message.content);
  assert.ok(new Set(texts).size >= 2, 'sampled choices differ');
  for (let i = 0; i < 3; i++) {
    const one = await tiny.chat.completions.create({ ...req, seed: 70 + i });
    assert.equal(texts[i], one.choices[0].message.content, `choice ${i}`);
  }
  const s = await collectN(await tiny.chat.completions.create({ ...req, n: 3, stream: true }), 3);
  assert.deepEqual(s.text, texts);
});

// ---- generation_config.json defaults (the tiny checkpoint ships temperature 0.7, top_p 0.8,
// top_k 20; its gateway runs with the default --generation-config auto) ----

test('tiny: response_format json_schema -> the random model answers conforming JSON, streamed and not', async () => {
  const schema = { type: 'object', additionalProperties: false, required: ['color', 'n', 'tags'],
                   properties: { color: { enum: ['red', 'green'] }, n: { type: 'integer' },
                                 tags: { type: 'array', items: { type: 'boolean' }, maxItems: 2 } } };
  const body = { model: MODEL, messages: user('an item'), max_tokens: 400, seed: 1,
                 response_format: { type: 'json_schema', json_schema: { name: 'item', strict: true, schema } } };
  const check = (text) => {
    const v = JSON.parse(text);
    assert.deepEqual(Object.keys(v).sort(), ['color', 'n', 'tags']);
    assert.ok(['red', 'green'].includes(v.color) && Number.isInteger(v.n), text);
    assert.ok(Array.isArray(v.tags) && v.tags.length <= 2 && v.tags.every((t) => typeof t === 'boolean'), text);
  };
  const r = await tiny.chat.completions.create(body);
  assert.equal(r.choices[0].finish_reason, 'stop');
  check(r.choices[0].message.content);
  const s = await collect(await tiny.chat.completions.create({ ...body, stream: true }));
  assert.equal(s.content, r.choices[0].message.content, 'streamed == non-streamed (same seed)');
  const o = await tiny.chat.completions.create({ ...body, seed: 2, max_tokens: 480,
    logit_bias: { 1: 8, 92: 8, 9207: 8, 497: 8, 1341: 8, 60: 8 }, /* ", }, "}, ", "], ]: shorter documents */
                                                 response_format: { type: 'json_object' } });
  assert.equal(o.choices[0].finish_reason, 'stop');
  assert.equal(typeof JSON.parse(o.choices[0].message.content), 'object');
});

test('tiny: tool_choice required / named -> the random model answers tool_calls, streamed and not', async () => {
  const tools = [
    { type: 'function', function: { name: 'get_weather', parameters: { type: 'object',
      properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] }, days: { type: 'integer' } },
      required: ['city'] } } },
    { type: 'function', function: { name: 'get_time', parameters: { type: 'object',
      properties: { utc: { type: 'boolean' } }, required: ['utc'] } } },
  ];
  /* bounded values (a string enum, an integer, a boolean: raw text values are in test_grammar_stack);
   * "</", "parameter", ">", ">\n" and the stop ids (Qwen3 ids): shorter numbers, fewer calls */
  const logit_bias = { 522: 20, 16181: 20, 29: 20, 397: 20, 151645: 20, 151643: 20 };
  const check = (name, args, only) => {
    assert.ok(['get_weather', 'get_time'].includes(name), name);
    if (only) assert.equal(name, only);
    const a = JSON.parse(args);
    if (name === 'get_weather') {
      assert.ok(['Paris', 'Oslo'].includes(a.city), args);
      assert.ok(a.days === undefined || Number.isInteger(a.days), args);
    } else {
      assert.equal(typeof a.utc, 'boolean', args);
    }
  };
  const cases = [['required', null, false], [{ type: 'function', function: { name: 'get_time' } }, 'get_time', true]];
  for (const [tool_choice, only, parallel_tool_calls] of cases) {
    const body = { model: MODEL, messages: user('weather?'), tools, tool_choice, parallel_tool_calls,
                   max_tokens: 280, seed: 3, logit_bias }; /* the tiny stack's context is 512 */
    const r = await tiny.chat.completions.create(body);
    assert.equal(r.choices[0].finish_reason, 'tool_calls');
    const tc = r.choices[0].message.tool_calls;
    assert.equal(tc.length, 1, 'one call: parallel_tool_calls false or a named function');
    check(tc[0].function.name, tc[0].function.arguments, only);
    const s = await collect(await tiny.chat.completions.create({ ...body, stream: true }));
    assert.deepEqual(s.finish, ['tool_calls']);
    assert.equal(s.tools.length, 1);
    check(s.tools[0].name, s.tools[0].arguments, only);
    assert.deepEqual(JSON.parse(s.tools[0].arguments), JSON.parse(tc[0].function.arguments),
                     'streamed == non-streamed (same seed)');
  }
  await expectError(tiny.chat.completions.create({ model: MODEL, messages: user('x'), tools,
                      tool_choice: 'required', response_format: { type: 'json_object' } }),
                    400, OpenAI.BadRequestError, 'cannot be combined');
});

test('tiny: generation_config.json fills the sampling fields a request leaves out', async () => {
  const base = { model: MODEL, messages: user('Pick words.'), max_tokens: 12 };
  let differs = false;
  for (const seed of [5, 6, 7]) {
    const d = (await tiny.chat.completions.create({ ...base, seed })).choices[0].message.content;
    const e = (await tiny.chat.completions.create(
      { ...base, seed, temperature: 0.7, top_p: 0.8, top_k: 20 })).choices[0].message.content;
    assert.equal(d, e, 'omitted fields == the checkpoint values given explicitly');
    const o = (await tiny.chat.completions.create(
      { ...base, seed, temperature: 1, top_p: 1, top_k: -1 })).choices[0].message.content;
    differs ||= o !== d;
  }
  assert.ok(differs, 'the OpenAI defaults sample differently');
});

// ---- scripted model text: reasoning and tool calls ----

const TOOLS = [
  { type: 'function', function: { name: 'get_weather', description: 'weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } },
                  required: ['city'] } } },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object',
    properties: { tz: { type: 'string' } } } } },
];
const TOOL_TEXT =
  '<think>\nThe user wants weather.\n</think>\n\nLet me check.' +
  '<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n' +
  '<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>\n' +
  '<tool_call>\n<function=get_time>\n<parameter=tz>\nEurope/Paris\n</parameter>\n</function>\n</tool_call>';

test('script: reasoning split, streamed == non-streamed', async () => {
  const req = { model: MODEL, messages: emit('<think>\nStep one, step two.\n</think>\n\nThe answer is 42.') };
  const full = await script.chat.completions.create(req);
  const m = full.choices[0].message;
  assert.equal(m.content, 'The answer is 42.');
  assert.equal(m.reasoning_content.trim(), 'Step one, step two.');
  assert.equal(m.reasoning, m.reasoning_content);
  assert.equal(full.choices[0].finish_reason, 'stop');
  const s = await collect(await script.chat.completions.create({ ...req, stream: true }));
  assert.equal(s.content, m.content);
  assert.equal(s.reasoning, m.reasoning_content);
});

test('script: two tool calls (qwen3_coder XML), streamed deltas parse, == non-streamed', async () => {
  const req = { model: MODEL, messages: emit(TOOL_TEXT), tools: TOOLS, tool_choice: 'auto' };
  const full = await script.chat.completions.create(req);
  const c = full.choices[0];
  assert.equal(c.finish_reason, 'tool_calls');
  assert.equal(c.message.content, 'Let me check.');
  assert.equal(c.message.reasoning_content.trim(), 'The user wants weather.');
  const tc = c.message.tool_calls;
  assert.equal(tc.length, 2);
  assert.equal(tc[0].type, 'function');
  assert.equal(tc[0].function.name, 'get_weather');
  assert.deepEqual(JSON.parse(tc[0].function.arguments), { city: 'Paris', days: 3 });
  assert.equal(tc[1].function.name, 'get_time');
  assert.deepEqual(JSON.parse(tc[1].function.arguments), { tz: 'Europe/Paris' });
  assert.ok(tc[0].id && tc[1].id && tc[0].id !== tc[1].id);
  const s = await collect(await script.chat.completions.create({ ...req, stream: true }));
  assert.deepEqual(s.finish, ['tool_calls']);
  assert.equal(s.content, c.message.content);
  assert.equal(s.reasoning, c.message.reasoning_content);
  assert.equal(s.tools.length, 2);
  for (let i = 0; i < 2; i++) {
    assert.equal(s.tools[i].name, tc[i].function.name);
    assert.deepEqual(JSON.parse(s.tools[i].arguments), JSON.parse(tc[i].function.arguments));
  }
  // the SDK's own accumulator agrees
  const fin = await script.chat.completions.stream(req).finalChatCompletion();
  const ftc = fin.choices[0].message.tool_calls;
  assert.equal(ftc.length, 2);
  assert.deepEqual(JSON.parse(ftc[0].function.arguments), { city: 'Paris', days: 3 });
  assert.equal(fin.choices[0].finish_reason, 'tool_calls');
});

test('script: tool_choice named and required still return the call', async () => {
  for (const tool_choice of ['required', { type: 'function', function: { name: 'get_weather' } }]) {
    const r = await script.chat.completions.create({ model: MODEL, messages: emit(TOOL_TEXT),
                                                     tools: TOOLS, tool_choice });
    assert.equal(r.choices[0].message.tool_calls[0].function.name, 'get_weather');
  }
  await expectError(script.chat.completions.create({ model: MODEL, messages: user('x'), tools: TOOLS,
                      tool_choice: { type: 'function', function: { name: 'nope' } } }),
                    400, OpenAI.BadRequestError, "unknown function 'nope'");
});

test('script: tool_choice "none" -> no tool_calls parsed', async () => {
  const r = await script.chat.completions.create({ model: MODEL, messages: emit(TOOL_TEXT), tools: TOOLS,
                                                   tool_choice: 'none' });
  assert.equal(r.choices[0].message.tool_calls, undefined);
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.ok(r.choices[0].message.content.includes('get_weather'));
});

test('script: stop string never leaks, even split across tokens', async () => {
  const req = { model: MODEL, messages: emit('alpha beta STOPPER gamma'), stop: ['STOPPER'] };
  const r = await script.chat.completions.create(req);
  assert.equal(r.choices[0].message.content, 'alpha beta ');
  assert.equal(r.choices[0].finish_reason, 'stop');
  const s = await collect(await script.chat.completions.create({ ...req, stream: true }));
  assert.equal(s.content, 'alpha beta ');
});

test('chat_template_kwargs and tools reach the prompt (via /tokenize + /detokenize)', async () => {
  const base = process.env.GW_SCRIPT_URL;
  const prompt = async (body) => {
    const t = await (await fetch(base + '/tokenize', { method: 'POST', body: JSON.stringify(body) })).json();
    const d = await (await fetch(base + '/detokenize', { method: 'POST',
                                                        body: JSON.stringify({ tokens: t.tokens }) })).json();
    return d.prompt;
  };
  const off = await prompt({ messages: user('hi'), chat_template_kwargs: { enable_thinking: false } });
  assert.ok(off.includes('<think>\n\n</think>'), 'enable_thinking=false pre-fills an empty think block');
  const none = await prompt({ messages: user('hi'), tools: TOOLS, tool_choice: 'none' });
  assert.ok(none.includes('get_weather'), 'tool_choice none still renders the tools (as vLLM)');
});

// ---- server options: default template kwargs, CORS, SSE keep-alive, metrics ----

const auth = { Authorization: `Bearer ${KEY}` };
async function renderPrompt(base, body, headers = {}) {
  const post = async (p, b) => {
    const r = await fetch(base + p, { method: 'POST', headers, body: JSON.stringify(b) });
    assert.equal(r.status, 200, `${p}: ${r.status}`);
    return r.json();
  };
  const t = await post('/tokenize', body);
  return (await post('/detokenize', { tokens: t.tokens })).prompt;
}

test('developer role = system before the template (Qwen3 drops it, Qwen3.5 refuses it raw)', async () => {
  const prompt = async (base, body) => {
    const r = await fetch(base + '/tokenize', { method: 'POST', body: JSON.stringify(body) });
    assert.equal(r.status, 200, `tokenize: ${await r.clone().text()}`);
    return (await r.json()).tokens;
  };
  const msgs = (role) => [{ role, content: 'Be brief.' }, ...user('hi')];
  for (const base of [process.env.GW_SCRIPT_URL, process.env.GW_Q35_URL]) {
    const dev = await prompt(base, { messages: msgs('developer') });
    const sys = await prompt(base, { messages: msgs('system') });
    assert.deepEqual(dev, sys, `${base}: developer renders as system`);
    const none = await prompt(base, { messages: user('hi') });
    assert.ok(dev.length > none.length + 2, 'the developer text is in the prompt');
  }
  const q35 = new OpenAI({ baseURL: process.env.GW_Q35_URL + '/v1', apiKey: 'unused', ...opts });
  const r = await q35.chat.completions.create({ model: MODEL,
    messages: [{ role: 'developer', content: 'Be brief.' }, ...emit('done')],
    chat_template_kwargs: { enable_thinking: false } });
  assert.equal(r.choices[0].message.content, 'done');
});

test('--default-chat-template-kwargs applies; the request kwargs win', async () => {
  const empty = '<think>\n\n</think>';
  const fakeUrl = process.env.GW_FAKE_URL;
  assert.ok((await renderPrompt(fakeUrl, { messages: user('hi') }, auth)).includes(empty),
            'server default enable_thinking=false pre-fills the empty think block');
  const on = await renderPrompt(fakeUrl, { messages: user('hi'),
                                           chat_template_kwargs: { enable_thinking: true } }, auth);
  assert.ok(!on.includes(empty), 'request enable_thinking=true overrides the server default');
  const noTools = await renderPrompt(fakeUrl, { messages: user('hi'), tools: TOOLS, tool_choice: 'none' }, auth);
  assert.ok(!noTools.includes('get_weather'), '--exclude-tools-when-tool-choice-none leaves them out');
  const withTools = await renderPrompt(fakeUrl, { messages: user('hi'), tools: TOOLS, tool_choice: 'auto' }, auth);
  assert.ok(withTools.includes('get_weather'), 'tool_choice auto still renders them');
  const other = await renderPrompt(process.env.GW_SCRIPT_URL, { messages: user('hi') });
  assert.ok(!other.includes(empty), 'a gateway without the flag keeps the template default');
});

test('CORS: preflight and headers only for allowed origins; off by default', async () => {
  const url = process.env.GW_FAKE_URL + '/v1/chat/completions';
  const pre = (origin, base = url) => fetch(base, { method: 'OPTIONS', headers: {
    Origin: origin, 'Access-Control-Request-Method': 'POST',
    'Access-Control-Request-Headers': 'authorization, content-type' } });
  let r = await pre('https://also.example');
  assert.equal(r.status, 200);
  assert.equal(r.headers.get('access-control-allow-origin'), 'https://also.example');
  assert.ok(r.headers.get('access-control-allow-methods').includes('POST'));
  assert.equal(r.headers.get('access-control-allow-headers'), 'authorization, content-type');
  r = await pre('https://evil.example');
  assert.equal(r.status, 403);
  assert.equal(r.headers.get('access-control-allow-origin'), null);
  r = await fetch(process.env.GW_FAKE_URL + '/v1/models', { headers: { ...auth, Origin: 'https://ok.example' } });
  assert.equal(r.status, 200);
  assert.equal(r.headers.get('access-control-allow-origin'), 'https://ok.example');
  r = await fetch(process.env.GW_FAKE_URL + '/v1/models', { headers: { ...auth, Origin: 'https://evil.example' } });
  assert.equal(r.headers.get('access-control-allow-origin'), null);
  r = await pre('https://ok.example', process.env.GW_SCRIPT_URL + '/v1/chat/completions');
  assert.equal(r.status, 405, 'no --allowed-origins: no CORS at all');
  assert.equal(r.headers.get('access-control-allow-origin'), null);
});

test('SSE keep-alive: ": ping" during a long prefill; the SDK ignores it', async () => {
  const body = { model: MODEL, stream: true, messages: emit('late but fine') };
  body.messages[0].content += ' [[delay_ms=900]]';
  const r = await fetch(process.env.GW_SCRIPT_URL + '/v1/chat/completions',
                        { method: 'POST', body: JSON.stringify(body) });
  assert.equal(r.status, 200);
  const text = await r.text();
  const pings = text.split('\n\n').filter((e) => e === ': ping').length;
  assert.ok(pings >= 2, `want >= 2 pings in 900 ms at 200 ms, got ${pings}`);
  assert.ok(text.endsWith('data: [DONE]\n\n'));
  const s = await collect(await script.chat.completions.create(body));
  assert.equal(s.content, 'late but fine');
  const full = await script.chat.completions.create({ ...body, stream: false });
  assert.equal(full.choices[0].message.content, 'late but fine');
});

test('raw SSE shape (what the Python SDK relies on too)', async () => {
  const r = await fetch(process.env.GW_FAKE_URL + '/v1/chat/completions', { method: 'POST',
    headers: auth, body: JSON.stringify({ model: MODEL, messages: user('hi'), max_tokens: 5, stream: true,
                                          stream_options: { include_usage: true } }) });
  assert.equal(r.status, 200);
  assert.ok(r.headers.get('content-type').startsWith('text/event-stream'));
  assert.equal(r.headers.get('cache-control'), 'no-cache');
  assert.equal(r.headers.get('content-length'), null);
  const text = await r.text();
  assert.ok(text.endsWith('\n\n'));
  const events = text.slice(0, -2).split('\n\n');
  assert.equal(events.filter((e) => e === 'data: [DONE]').length, 1);
  assert.equal(events[events.length - 1], 'data: [DONE]');
  const chunks = events.slice(0, -1).map((e) => {
    assert.ok(e.startsWith('data: {') && !e.includes('\n'), `bad event ${JSON.stringify(e)}`);
    return JSON.parse(e.slice(6));
  });
  assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
  const last = chunks[chunks.length - 1];
  assert.deepEqual(last.choices, []);
  assert.equal(last.usage.completion_tokens, 5);
  assert.equal(last.id, chunks[0].id, 'the usage chunk carries the id (the SDK helper needs it)');
  const fin = chunks[chunks.length - 2].choices[0];
  assert.equal(fin.finish_reason, 'length');
  assert.deepEqual(fin.delta, {});
});

test('client abort mid-stream cancels the request at the scheduler (n = 1 and every choice of n = 2)', async () => {
  const base = process.env.GW_SCRIPT_URL;
  const running = async () => {
    const t = await (await fetch(base + '/metrics')).text();
    return Number(t.match(/^vllm:num_requests_running\{[^}]*\} (\S+)$/m)[1]);
  };
  for (const n of [1, 2]) {
    const ac = new AbortController();
    const stream = await script.chat.completions.create(
      { model: MODEL, stream: true, n, messages: emit('x'.repeat(50) + ' [[delay_ms=8000]]') },
      { signal: ac.signal });
    let t0 = Date.now();
    while ((await running()) < n) {
      assert.ok(Date.now() - t0 < 5000, 'the request never showed as running');
      await new Promise((res) => setTimeout(res, 50));
    }
    ac.abort();
    // the SDK ends the iteration quietly on its own abort
    try { for await (const _ of stream); } catch (e) { assert.ok(/abort/i.test(String(e))); }
    t0 = Date.now();
    while ((await running()) !== 0) {
      assert.ok(Date.now() - t0 < 5000, 'the scheduler still runs the aborted request');
      await new Promise((res) => setTimeout(res, 50));
    }
  }
});

// ---- POST /v1/responses (stateless, over the chat path) ----

/* Drain a Responses event stream: sequence_number counts from 0, created + in_progress come
 * first, one terminal event comes last; returns the text deltas and the final response. */
async function rcollect(stream) {
  const r = { types: [], text: '', reasoning: '', args: {}, final: null };
  let seq = 0;
  for await (const e of stream) {
    assert.equal(e.sequence_number, seq++, 'sequence_number counts up from 0');
    r.types.push(e.type);
    if (e.type === 'response.output_text.delta') r.text += e.delta;
    if (e.type === 'response.reasoning_text.delta') r.reasoning += e.delta;
    if (e.type === 'response.function_call_arguments.delta')
      r.args[e.output_index] = (r.args[e.output_index] ?? '') + e.delta;
    if (e.type === 'response.completed' || e.type === 'response.incomplete') r.final = e.response;
  }
  assert.deepEqual(r.types.slice(0, 2), ['response.created', 'response.in_progress']);
  assert.ok(r.final, 'a terminal event');
  assert.equal(r.types.filter((t) => t === 'response.completed' || t === 'response.incomplete').length, 1);
  assert.ok(r.types.at(-1) === 'response.completed' || r.types.at(-1) === 'response.incomplete');
  assert.equal(r.types.filter((t) => t === 'response.output_item.added').length, r.final.output.length);
  assert.equal(r.types.filter((t) => t === 'response.output_item.done').length, r.final.output.length);
  return r;
}

/* output items without the per-request ids (and the SDK helper's parsed fields) */
const items = (out) => JSON.parse(JSON.stringify(out, (k, v) =>
  (['id', 'call_id', 'parsed', 'parsed_arguments'].includes(k) ? undefined : v)));

test('responses (fake): create, streamed events and the SDK stream helper agree; max_output_tokens -> incomplete', async () => {
  const req = { model: MODEL, input: 'Tell me.', instructions: 'Be brief.', max_output_tokens: 5,
                temperature: 0, metadata: { k: 'v' }, user: 'u1', store: false };
  const full = await fake.responses.create(req);
  assert.match(full.id, /^resp_/);
  assert.equal(full.object, 'response');
  assert.equal(typeof full.created_at, 'number');
  assert.equal(full.model, MODEL);
  assert.equal(full.status, 'incomplete');
  assert.deepEqual(full.incomplete_details, { reason: 'max_output_tokens' });
  assert.equal(full.instructions, 'Be brief.');
  assert.deepEqual(full.metadata, { k: 'v' });
  assert.equal(full.user, 'u1');
  assert.equal(full.store, false);
  assert.equal(full.usage.output_tokens, 5);
  assert.ok(full.usage.input_tokens > 0);
  assert.equal(full.usage.total_tokens, full.usage.input_tokens + 5);
  assert.deepEqual(full.usage.input_tokens_details, { cached_tokens: 0 });
  assert.deepEqual(full.usage.output_tokens_details, { reasoning_tokens: 0 });
  assert.ok(full.output.some((o) => o.type === 'message'), 'a message item');
  // the same request as chat gives the same answer and prompt
  const chat = await fake.chat.completions.create({ model: MODEL, max_tokens: 5, temperature: 0,
    messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Tell me.' }] });
  assert.equal(full.usage.input_tokens, chat.usage.prompt_tokens);
  assert.equal(full.output_text, chat.choices[0].message.content ?? '');
  const s = await rcollect(await fake.responses.create({ ...req, stream: true }));
  assert.equal(s.types.at(-1), 'response.incomplete');
  assert.equal(s.text, full.output_text);
  assert.deepEqual(items(s.final.output), items(full.output));
  assert.deepEqual(s.final.usage, full.usage);
  const fin = await fake.responses.stream(req).finalResponse();
  assert.equal(fin.output_text, full.output_text);
  assert.deepEqual(items(fin.output), items(full.output));
  // a function tool reaches the real stack (the fake engine answers in text)
  const t = await fake.responses.create({ model: MODEL, input: 'weather?', max_output_tokens: 3,
    tools: [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: {} } }] });
  assert.equal(t.usage.output_tokens, 3);
  assert.ok(t.usage.input_tokens > full.usage.input_tokens - 10, 'the tool is in the prompt');
  assert.equal(t.tools[0].name, 'get_weather');
});

const RTOOLS = TOOLS.map((t) => ({ type: 'function', name: t.function.name,
                                   description: t.function.description, parameters: t.function.parameters }));

test('responses (script): reasoning, message and function_call items, streamed == not; output fed back as input', async () => {
  const req = { model: MODEL, input: `Please answer. [[emit]]${TOOL_TEXT}[[/emit]]`, tools: RTOOLS };
  const full = await script.responses.create(req);
  assert.equal(full.status, 'completed');
  assert.equal(full.incomplete_details, null);
  assert.deepEqual(full.output.map((o) => o.type), ['reasoning', 'message', 'function_call', 'function_call']);
  assert.equal(full.output[0].content[0].type, 'reasoning_text');
  assert.equal(full.output[0].content[0].text.trim(), 'The user wants weather.');
  assert.equal(full.output_text, 'Let me check.');
  const [f1, f2] = full.output.slice(2);
  assert.equal(f1.name, 'get_weather');
  assert.deepEqual(JSON.parse(f1.arguments), { city: 'Paris', days: 3 });
  assert.equal(f2.name, 'get_time');
  assert.deepEqual(JSON.parse(f2.arguments), { tz: 'Europe/Paris' });
  assert.ok(f1.call_id && f2.call_id && f1.call_id !== f2.call_id);
  assert.match(f1.id, /^fc_/);
  const s = await rcollect(await script.responses.create({ ...req, stream: true }));
  assert.equal(s.types.at(-1), 'response.completed');
  assert.equal(s.text, 'Let me check.');
  assert.equal(s.reasoning, full.output[0].content[0].text);
  assert.deepEqual(JSON.parse(s.args[2]), { city: 'Paris', days: 3 });
  assert.deepEqual(JSON.parse(s.args[3]), { tz: 'Europe/Paris' });
  assert.equal(s.types.filter((t) => t === 'response.function_call_arguments.done').length, 2);
  assert.deepEqual(items(s.final.output), items(full.output));
  const fin = await script.responses.stream(req).finalResponse();
  assert.deepEqual(items(fin.output), items(full.output));
  // the next turn: the previous output (reasoning and calls) plus the results, stateless
  const next = await script.responses.create({ model: MODEL, tools: RTOOLS, input: [
    { role: 'user', content: 'weather?' }, ...full.output,
    { type: 'function_call_output', call_id: f1.call_id, output: 'sunny' },
    { type: 'function_call_output', call_id: f2.call_id, output: 'noon [[emit]]It is sunny.[[/emit]]' }] });
  assert.equal(next.output_text, 'It is sunny.');
  assert.deepEqual(next.output.map((o) => o.type), ['message']);
  // tool_choice "none": no function_call items, the text stays
  const none = await script.responses.create({ ...req, tool_choice: 'none' });
  assert.ok(!none.output.some((o) => o.type === 'function_call'));
});

test('responses: bad input -> 400 with the Responses param; previous_response_id refused (stateless)', async () => {
  let e = await expectError(fake.responses.create({ model: MODEL, input: 'x', previous_response_id: 'resp_1' }),
                            400, OpenAI.BadRequestError, 'stateless');
  assert.equal(e.param, 'previous_response_id');
  e = await expectError(fake.responses.create({ model: MODEL, input: 'x', stream: true,
                                                text: { format: { type: 'json_object' } } }),
                        400, OpenAI.BadRequestError, 'not supported');
  assert.equal(e.param, 'text.format');
  e = await expectError(fake.responses.create({ model: MODEL, input: 'x', temperature: 3 }),
                        400, OpenAI.BadRequestError, "'temperature' must be in");
  assert.equal(e.param, 'temperature');
  e = await expectError(fake.responses.create({ model: MODEL, input: 'x', tools: [{ type: 'web_search' }] }),
                        400, OpenAI.BadRequestError, 'web_search');
  assert.equal(e.param, 'tools[0].type');
  e = await expectError(fake.responses.create({ model: 'gpt-4o', input: 'x' }),
                        404, OpenAI.NotFoundError, "The model 'gpt-4o' does not exist");
  e = await expectError(fake.responses.create({ model: MODEL, input: 'x '.repeat(MML) }),
                        400, OpenAI.BadRequestError, 'maximum context length');
  assert.equal(e.param, 'input');
});

test('/metrics: process, http_requests_total, vLLM names (runs last)', async () => {
  const t = await (await fetch(process.env.GW_FAKE_URL + '/metrics')).text();
  const val = (re) => {
    const m = t.match(re);
    assert.ok(m, `no series ${re}`);
    return Number(m[1]);
  };
  assert.ok(val(/^process_resident_memory_bytes (\S+)$/m) > 1e6);
  assert.ok(val(/^process_open_fds (\S+)$/m) >= 3);
  assert.ok(val(/^process_cpu_seconds_total (\S+)$/m) > 0);
  assert.ok(val(/^http_requests_total\{handler="\/v1\/chat\/completions",method="POST",status="401"\} (\S+)$/m) >= 1);
  assert.ok(val(/^http_requests_total\{handler="\/v1\/chat\/completions",method="POST",status="200"\} (\S+)$/m) >= 5);
  assert.ok(val(/^http_requests_total\{handler="\/v1\/models",method="GET",status="200"\} (\S+)$/m) >= 1);
  assert.ok(val(/^http_requests_total\{handler="preflight",method="OPTIONS",status="403"\} (\S+)$/m) >= 1);
  assert.ok(val(/^vllm:request_queue_time_seconds_count\{model_name="[^"]+"\} (\S+)$/m) >= 5);
  assert.ok(val(/^vllm:generation_tokens_total\{model_name="[^"]+"\} (\S+)$/m) >= 50);
  for (const n of ['num_preemptions_total', 'spec_decode_num_drafts_total',
                   'spec_decode_num_draft_tokens_total', 'spec_decode_num_accepted_tokens_total'])
    assert.equal(val(new RegExp(`^vllm:${n}\\{model_name="[^"]+"\\} (\\S+)$`, 'm')), 0);
  assert.ok(t.includes('# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter'));
});

// ---- run ----

let failed = 0;
for (const t of tests) {
  const t0 = Date.now();
  try {
    await t.fn();
    console.log(`PASS ${t.name} (${Date.now() - t0} ms)`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${t.name}: ${e.stack || e}`);
  }
}
console.log(`${tests.length - failed}/${tests.length} passed`);
process.exit(failed ? 1 : 0);
