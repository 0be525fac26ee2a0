// `npm pack` / `npm publish` (prepack): copies the repository's protos/ into
// protos/ here, so the package carries the .proto files src/index.js loads;
// `--remove` (postpack) deletes the copy again. It is never committed
// (.gitignore): the repository's protos/ stay the only source.
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';

const source = fileURLToPath(new URL('../../../protos', import.meta.url));
const target = fileURLToPath(new URL('../protos', import.meta.url));

fs.rmSync(target, { recursive: true, force: true });
if (!process.argv.includes('--remove')) {
  if (!fs.existsSync(source)) {
    throw new Error(`no ${source}: pack the package from a checkout of the Concord repository`);
  }
  fs.cpSync(source, target, { recursive: true });
}
