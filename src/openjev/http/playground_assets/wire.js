// The playground's translations, free of the DOM: the form to each contract's request body, a
// response to one row of option probabilities per question, and the request as curl and Python.
// Hand-written, no build step: page.js reads it as window.PlaygroundWire.
"use strict";

(function () {
  const KINDS = { noul: "yes/no", choice: "choice", score: "score" };
  const REASONS = {
    400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
    413: "Content Too Large", 415: "Unsupported Media Type", 422: "Unprocessable Entity",
    429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway",
    503: "Service Unavailable", 504: "Gateway Timeout", 529: "Overloaded",
  };

  // The State text area holds JSON when it parses to an object or an array (a chat transcript is
  // an array of {role, content}); anything else, including a bare JSON string or number, is text.
  function readState(text) {
    const trimmed = text.trim();
    if (trimmed.startsWith("{") || trimmed.startsWith("[")) {
      try {
        const value = JSON.parse(trimmed);
        return { kind: messagesOf(value) ? "transcript" : "json", value };
      } catch (error) {
        return { kind: "text", value: text, note: `not valid JSON (${error.message}), so sent as text` };
      }
    }
    return { kind: "text", value: text };
  }

  function messagesOf(value) {
    const list = Array.isArray(value) ? value : value && Array.isArray(value.messages) ? value.messages : null;
    const isMessage = (m) => m !== null && typeof m === "object" && typeof m.role === "string" && "content" in m;
    return list && list.length > 0 && list.every(isMessage) ? list : null;
  }

  function describeState(state) {
    const note = state.note ? ` (${state.note})` : "";
    if (state.kind === "transcript") {
      return "Read as a chat transcript: System One's state, and Decisions' input messages.";
    }
    if (state.kind === "json") {
      return "Read as JSON: System One's state as it is; Decisions gets its JSON text as input.";
    }
    return `Read as plain text: the state on System One, the input on Decisions${note}.`;
  }

  // System One's questions (a map), as the form's list of questions.
  function questionsFromSystemOne(questions) {
    const text = (value) => (value === undefined || value === null ? "" : typeof value === "string" ? value : JSON.stringify(value));
    return Object.entries(questions).map(([id, q]) => ({
      id,
      kind: q.type,
      instructions: text(q.instructions),
      options: q.type === "choice" ? Object.entries(q.criteria).map(([name, d]) => ({ name, description: text(d) })) : [],
      levels: q.type === "score" ? q.criteria.map(text) : [],
    }));
  }

  function systemOneQuestion(q) {
    const question = { type: q.kind };
    if (q.instructions) question.instructions = q.instructions;
    if (q.kind === "choice") {
      question.criteria = Object.fromEntries(q.options.map((o) => [o.name, o.description || null]));
    } else if (q.kind === "score") {
      question.criteria = [...q.levels];
    }
    return question;
  }

  function decisionsQuestion(q) {
    const question = { type: q.kind === "noul" ? "predicate" : q.kind };
    if (q.id) question.name = q.id;
    question.instructions = q.instructions;
    if (q.kind === "choice") {
      question.choices = q.options.map((o) => (o.description ? { value: o.name, description: o.description } : { value: o.name }));
    } else if (q.kind === "score") {
      question.levels = q.levels.map((label) => ({ label }));
    }
    return question;
  }

  function decisionsInput(state) {
    if (state.kind === "text") return state.value;
    return messagesOf(state.value) || JSON.stringify(state.value);
  }

  // The request body of `contract` ("systemone" or "decisions") for the form.
  function requestBody(contract, form) {
    const state = readState(form.stateText);
    if (contract === "decisions") {
      return { model: form.model, input: decisionsInput(state), questions: form.questions.map(decisionsQuestion) };
    }
    const questions = Object.fromEntries(form.questions.map((q) => [q.id, systemOneQuestion(q)]));
    return { model: form.model, state: state.value, questions };
  }

  // What the form says that a request cannot: names a map keeps once.
  function formNotes(form) {
    const notes = [];
    const twice = (names) => names.filter((name, i) => names.indexOf(name) !== i);
    for (const id of new Set(twice(form.questions.map((q) => q.id)))) {
      notes.push(`Two questions are named "${id}": System One keeps only the last one.`);
    }
    for (const q of form.questions.filter((q) => q.kind === "choice")) {
      for (const name of new Set(twice(q.options.map((o) => o.name)))) {
        notes.push(`Question "${q.id}" has two options named "${name}": System One keeps only the last one.`);
      }
    }
    return notes;
  }

  function yesNo(name, p) {
    return {
      name, kind: KINDS.noul, answer: p >= 0.5 ? "yes" : "no", confidence: null,
      options: [{ label: "yes", probability: p }, { label: "no", probability: 1 - p }],
    };
  }

  function label(value) {
    return typeof value === "string" ? value : JSON.stringify(value);
  }

  function mostProbable(options) {
    return options.reduce((best, o) => (o.probability > best.probability ? o : best), options[0]);
  }

  function scoreRow(name, answer, options) {
    const top = options.length ? ` (most probable level: ${mostProbable(options).label})` : "";
    return { name, kind: KINDS.score, answer: `${answer.score.toFixed(3)}${top}`, confidence: answer.confidence, options };
  }

  function systemOneRows(body) {
    return Object.entries(body.answers).map(([name, a]) => {
      if (a.type === "noul") return yesNo(name, a.noul);
      if (a.type === "choice") {
        const options = Object.entries(a.probabilities).map(([o, probability]) => ({ label: o, probability }));
        return { name, kind: KINDS.choice, answer: a.choice, confidence: a.confidence, options };
      }
      const options = Object.entries(a.probabilities).map(([level, probability]) => ({
        label: label(a.legend[level] ?? level), probability,
      }));
      return scoreRow(name, a, options);
    });
  }

  function decisionsRows(body) {
    return body.answers.map((a, i) => {
      const name = a.name ?? `#${i + 1}`;
      if (a.type === "predicate") return yesNo(name, a.probability);
      if (a.type === "choice") {
        const options = a.probabilities.map((p) => ({ label: label(p.value), probability: p.probability }));
        return { name, kind: KINDS.choice, answer: label(a.choice), confidence: a.confidence, options };
      }
      if (a.type === "score") {
        return scoreRow(name, a, a.probabilities.map((p) => ({ label: p.label, probability: p.probability })));
      }
      return { name, kind: a.type, answer: `refused: ${a.x_reason}`, confidence: null, options: [] };
    });
  }

  // One row per answered question: {name, kind, answer, confidence (null if none), options}.
  function answerRows(contract, body) {
    return contract === "decisions" ? decisionsRows(body) : systemOneRows(body);
  }

  // The usage figures: tokens from the body (both contracts), the cache and prefix from headers.
  function usageRows(contract, body, header) {
    const usage = body.usage || {};
    const reported = header("x-openjev-cached-tokens");
    const cached = contract === "decisions" && usage.input_tokens_details
      ? String(usage.input_tokens_details.cached_tokens) + (reported === null ? " (not reported by the backend)" : "")
      : reported ?? "not reported by the backend";
    const rows = [
      ["Input tokens", String(usage.input_tokens)],
      ["Cached tokens", cached],
      ["Output tokens", String(usage.output_tokens)],
    ];
    const prefix = header("x-openjev-prefix-tokens");
    if (prefix !== null) rows.push(["Shared prefix tokens", prefix]);
    return rows;
  }

  // `Server-Timing: prepare;dur=1.2;desc="…", …` as "prepare 1.2 ms · …".
  function serverTiming(value) {
    if (!value) return null;
    return value.split(",").map((entry) => {
      const [name, ...params] = entry.trim().split(";");
      const dur = params.find((p) => p.startsWith("dur="));
      return dur ? `${name} ${Number(dur.slice(4)).toFixed(1)} ms` : name;
    }).join(" · ");
  }

  function statusLine(status, statusText) {
    return `HTTP ${status} ${statusText || REASONS[status] || ""}`.trim();
  }

  // A Python literal, wrapped as black would at 88 columns; `lead`: what precedes it on its line.
  function python(value, depth = 0, lead = 0) {
    if (value === null) return "None";
    if (value === true) return "True";
    if (value === false) return "False";
    if (typeof value !== "object") return JSON.stringify(value); // JSON's strings are Python strings
    const isList = Array.isArray(value);
    const pad = "    ".repeat(depth + 1);
    const items = isList
      ? value.map((v) => python(v, depth + 1, pad.length))
      : Object.entries(value).map(([k, v]) => {
        const key = `${JSON.stringify(k)}: `;
        return key + python(v, depth + 1, pad.length + key.length);
      });
    const [open, close] = isList ? ["[", "]"] : ["{", "}"];
    const inline = open + items.join(", ") + close;
    if (items.length === 0 || (lead + inline.length + 1 <= 88 && !inline.includes("\n"))) return inline;
    return `${open}\n${items.map((item) => pad + item).join(",\n")},\n${"    ".repeat(depth)}${close}`;
  }

  function curl(url, body, keyed) {
    const json = JSON.stringify(body, null, 2).replaceAll("'", "'\\''");
    const key = keyed ? `\n  -H "Authorization: Bearer $OPENJEV_API_KEY" \\` : "";
    return `curl -s ${url} \\\n  -H 'Content-Type: application/json' \\${key}\n  -d '${json}'`;
  }

  // The call in the contract's official SDK: TypeSafe's for System One, OpenAI's for Decisions.
  function pythonSnippet(contract, origin, body, keyed) {
    const key = keyed ? 'os.environ["OPENJEV_API_KEY"]' : '"unused"';
    const imports = keyed ? "import os\n\n" : "";
    const args = (entries) => entries.map(([name, value]) => `    ${name}=${python(value, 1, 5 + name.length)},`).join("\n");
    if (contract === "decisions") {
      return `${imports}from openai import OpenAI

client = OpenAI(base_url="${origin}/v1", api_key=${key})
decision = client.decisions.create(
${args([["model", body.model], ["input", body.input], ["questions", body.questions]])}
)
for answer in decision.answers:
    print(answer)
`;
    }
    return `${imports}from typesafe_sdk import TypeSafeClient

client = TypeSafeClient(base_url="${origin}", api_key=${key})
result = client.system_one(
${args([["model", body.model], ["state", body.state], ["questions", body.questions]])}
)
for name, answer in result.answers.items():
    print(name, answer)
`;
  }

  window.PlaygroundWire = {
    KINDS, readState, describeState, questionsFromSystemOne, requestBody, formNotes,
    answerRows, usageRows, serverTiming, statusLine, python, curl, pythonSnippet,
  };
})();
