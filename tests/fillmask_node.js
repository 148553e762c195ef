// Runs lib/bertfamily/web/fillmask.js's core in Node for tests/test_webmodel.py:
//   node tests/fillmask_node.js FILLMASK_JS EXPORT_FOLDER < sentences.json
// prints {"results": [{"ids": [...WordPiece ids], "guesses": [[[piece, p], ...], ...]} or {"error": ...}, ...]}
const fs = require("fs");
const core = require(process.argv[2]);
const folder = process.argv[3];
const manifest = JSON.parse(fs.readFileSync(folder + "/course-model.json", "utf8"));
const bin = fs.readFileSync(folder + "/course-model.bin");
const model = new core.Model(manifest, bin.buffer.slice(bin.byteOffset, bin.byteOffset + bin.byteLength));
const results = JSON.parse(fs.readFileSync(0, "utf8")).map(text => {
  try {
    const ids = model.tokenizer.encode(text);
    return { ids, guesses: text.includes("[MASK]") ? model.guess(text) : [] };
  } catch (error) {
    return { error: error.message };
  }
});
console.log(JSON.stringify({ results }));
