// kubectl-media as a user runs it, but in this process through the plugin's own main(): its real
// argument parsing and output, against the test control plane.
import { main } from "../../src/cli/main.js";
import { testKubeconfigPath } from "./kube.js";

/**
 * `kubectl media <args>` with the test control plane's kubeconfig (or `kubeconfig`: another
 * user's) and `environment`: its exit code and output.
 */
export async function kubectlMedia(
  args: string[],
  environment: NodeJS.ProcessEnv = {},
  kubeconfig = testKubeconfigPath(),
): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const code = await main([...args, "--kubeconfig", kubeconfig], environment, {
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
  });
  return { code, stdout, stderr };
}
