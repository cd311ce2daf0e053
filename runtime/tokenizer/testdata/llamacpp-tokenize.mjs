// llama.cpp's tokenization of some texts with the vocabularies of some GGUF
// files, from the prebuilt llama.cpp that the npm package node-llama-cpp
// ships: the oracle of the tokenizer tests (llamacpp_test.go runs it).
//
//   NODE_PATH=DIR/node_modules node llamacpp-tokenize.mjs A.gguf [B.gguf ...] < texts.json
//
// stdin is a JSON array of strings. Each text is tokenized without BOS/EOS
// and with special-token text read as plain text (llama_tokenize with
// add_special = parse_special = false). Prints one JSON object mapping each
// file to an array with the token ids of every text.
import {createRequire} from "node:module";
import {readFileSync} from "node:fs";
const require = createRequire(process.env.NODE_PATH ? process.env.NODE_PATH.split(":")[0] + "/" : import.meta.url);
const {getLlama} = await import(require.resolve("node-llama-cpp"));

const paths = process.argv.slice(2);
if (paths.length === 0) {
  console.error("usage: llamacpp-tokenize.mjs A.gguf [B.gguf ...] < texts.json");
  process.exit(2);
}
const texts = JSON.parse(readFileSync(0, "utf8"));
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const out = {};
for (const path of paths) {
  const model = await llama.loadModel({modelPath: path, vocabOnly: true});
  out[path] = texts.map((t) => Array.from(model.tokenize(t, false)));
  await model.dispose();
}
// Exit only once the output is written: a pipe takes it asynchronously.
process.stdout.write(JSON.stringify(out) + "\n", () => process.exit(0));
