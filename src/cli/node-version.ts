// The Node the CLI needs: package.json "engines" (^24.11.0). Kept free of imports, so the check
// runs before the Kubernetes client is loaded.
const REQUIRED_NODE = { major: 24, minor: 11 } as const;

/** Why this Node cannot run the CLI, or undefined when it can. */
export function nodeVersionProblem(version: string): string | undefined {
  const [major = 0, minor = 0] = version.split(".").map(Number);
  const { major: needMajor, minor: needMinor } = REQUIRED_NODE;
  if (major > needMajor || (major === needMajor && minor >= needMinor)) return undefined;
  return (
    `needs Node.js ${needMajor}.${needMinor} or newer; this is Node.js ${version}. ` +
    `Install Node.js ${needMajor} (https://nodejs.org/en/download) and run kubectl-media with it ` +
    `(from a checkout, 'make node' downloads the project's Node into .local/node and bin/kubectl-media uses it).`
  );
}
