// A consumer of rlspec's known-answer vectors written in another language: JavaScript (Node.js >= 18,
// no dependencies). It implements two operations, gae and ppo_clip_loss, runs every case of their vector
// files, and accounts for every file the manifest lists, so that no case is skipped silently.
//
//   node run-vectors.mjs VECTORS_DIR            # the correct implementations: exit 0 when every case passes
//   node run-vectors.mjs VECTORS_DIR --broken   # a twin with two real bugs: exit 1, naming the bugs caught
//
// The format (docs/vectors.md): each case gives inputs, and per output `value` (with `low`/`high` at a kink),
// a tolerance per element for float64 and float32, `null` for elements not compared, and `flags`, the named
// bugs the case catches. An element passes when low - tol <= actual <= high + tol.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const [folder, ...options] = process.argv.slice(2);
if (!folder) {
  console.error("usage: node run-vectors.mjs VECTORS_DIR [--broken]");
  process.exit(2);
}
const broken = options.includes("--broken");

// ---------------------------------------------------------------------------------------------
// the implementations under test (float64: JavaScript numbers)

const MY_CONVENTIONS = { ppo_clip_loss: { dual_clip: null, clip_eps_high: null } };

// GAE over a time-major rollout, (T,) or (T, N): delta_t = r_t + gamma (1 - terminated_t) V'_t - V_t,
// A_t = delta_t + gamma lambda (1 - end_t) A_{t+1}, end = terminated or truncated; returns = A + V.
function gae({ rewards, values, next_values, terminated, truncated, gamma, lam }) {
  const columns = Array.isArray(rewards[0]);
  const col = (a, j) => (columns ? a.map((row) => row[j]) : a);
  const n = columns ? rewards[0].length : 1;
  const T = rewards.length;
  const adv = [];
  for (let j = 0; j < n; j++) {
    const [r, v, nv, term, trunc] = [rewards, values, next_values, terminated, truncated].map((a) => col(a, j));
    const a = new Array(T).fill(0);
    let running = 0;
    for (let t = T - 1; t >= 0; t--) {
      // the broken twin treats a time-limit truncation as termination: no bootstrap from V(final observation)
      const cut = broken ? term[t] || trunc[t] : term[t];
      const delta = r[t] + (cut ? 0 : gamma * nv[t]) - v[t];
      running = delta + (term[t] || trunc[t] ? 0 : gamma * lam * running);
      a[t] = running;
    }
    adv.push(a);
  }
  const advantages = columns ? rewards.map((_, t) => adv.map((a) => a[t])) : adv[0];
  const returns = columns ? advantages.map((row, t) => row.map((x, j) => x + values[t][j])) : advantages.map((x, t) => x + values[t]);
  return { advantages, returns };
}

// The clipped surrogate as a loss, -mean(min(r A, clip(r, 1 - eps, 1 + eps) A)), r = exp(logp_new - logp_old),
// and its derivative with respect to logp_new: -r A / B where the unclipped term is the minimum, else 0.
function ppo_clip_loss({ logp_new, logp_old, advantages, clip_eps }) {
  const B = advantages.length;
  let loss = 0;
  const grad = [];
  for (let i = 0; i < B; i++) {
    const r = Math.exp(logp_new[i] - logp_old[i]);
    const A = advantages[i];
    const unclipped = r * A;
    const clipped = Math.min(Math.max(r, 1 - clip_eps), 1 + clip_eps) * A;
    // the broken twin drops the min: it always takes the clipped term
    const useUnclipped = broken ? r > 1 - clip_eps && r < 1 + clip_eps : unclipped <= clipped;
    loss -= (useUnclipped ? unclipped : clipped) / B;
    grad.push(useUnclipped ? -unclipped / B : 0);
  }
  return { loss, "d loss / d logp_new": grad };
}

const IMPLEMENTED = { gae, ppo_clip_loss };

// ---------------------------------------------------------------------------------------------
// reading the set: every file the manifest lists, its SHA-256 checked

const revive = (key, value) => (value === "nan" ? NaN : value === "inf" ? Infinity : value === "-inf" ? -Infinity : value);
const manifestText = readFileSync(join(folder, "manifest.json"), "utf8");
const manifest = JSON.parse(manifestText);
if (manifest.format !== "rlspec-vectors" || manifest.version !== 1) {
  console.error(`unsupported vector set: ${manifest.format} version ${manifest.version} (this runner reads version 1)`);
  process.exit(2);
}

const flat = (x) => (Array.isArray(x) ? x.flat(Infinity) : [x]);

function compare(name, spec, actual) {
  if (spec.finite) return flat(actual).every(Number.isFinite) ? null : `${name}: expected finite values`;
  const [value, low, high, tol, got] = [spec.value, spec.low ?? spec.value, spec.high ?? spec.value, spec.tol.float64, actual].map(flat);
  for (let i = 0; i < value.length; i++) {
    if (value[i] === null) continue; // not compared (a masked position)
    const ok = Number.isNaN(value[i]) ? Number.isNaN(got[i]) : got[i] >= low[i] - tol[i] && got[i] <= high[i] + tol[i];
    if (!ok) return `${name}[${i}]: expected ${low[i] === high[i] ? value[i] : `[${low[i]}, ${high[i]}]`} (tol ${tol[i]}), got ${got[i]}`;
  }
  return null;
}

let [passed, failed, skipped, notImplemented, total] = [0, 0, 0, 0, 0];
const caught = new Set();
for (const entry of manifest.files) {
  const text = readFileSync(join(folder, entry.file), "utf8");
  const digest = createHash("sha256").update(text).digest("hex");
  if (digest !== entry.sha256) {
    console.error(`${entry.file}: SHA-256 ${digest} differs from the manifest's ${entry.sha256}`);
    process.exit(2);
  }
  const data = JSON.parse(text, revive);
  if (data.cases.length !== entry.cases) {
    console.error(`${entry.file}: ${data.cases.length} cases, the manifest says ${entry.cases}`);
    process.exit(2);
  }
  total += data.cases.length;
  const implementation = IMPLEMENTED[data.operation];
  if (!implementation) {
    notImplemented += data.cases.length;
    continue;
  }
  for (const c of data.cases) {
    const mine = MY_CONVENTIONS[c.operation] ?? {};
    const other = Object.keys(c.conventions).filter((k) => JSON.stringify(c.conventions[k]) !== JSON.stringify(mine[k] ?? null));
    if (other.length) {
      skipped += 1;
      console.log(`  skip  ${c.id}: assumes ${other.map((k) => `${k} = ${JSON.stringify(c.conventions[k])}`).join(", ")}`);
      continue;
    }
    const actual = implementation(c.inputs);
    const problems = Object.entries(c.expected).map(([name, spec]) => compare(name, spec, actual[name])).filter(Boolean);
    if (problems.length) {
      failed += 1;
      c.flags.forEach((f) => caught.add(f));
      console.log(`  FAIL  ${c.id} (${c.clauses.join(", ")}): ${problems.join("; ")}`);
    } else {
      passed += 1;
      console.log(`  pass  ${c.id}`);
    }
  }
}

// Every case of the set is accounted for: run, skipped for a convention, or of an operation not implemented.
if (passed + failed + skipped + notImplemented !== total) {
  console.error(`accounting error: ${passed + failed + skipped + notImplemented} of ${total} cases`);
  process.exit(2);
}
console.log(`${total} cases in ${manifest.files.length} files: ${passed} passed, ${failed} failed, ${skipped} skipped ` +
            `(another convention), ${notImplemented} of operations this runner does not implement`);
if (failed) console.log(`bugs these failures point at (the cases' flags): ${[...caught].sort().join(", ")}`);
process.exit(failed ? 1 : 0);
