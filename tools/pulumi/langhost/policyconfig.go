package main

// A --policy-pack-config file the Pulumi CLI cannot parse as JSON (not JSON, 1e309, cut short) is refused
// by the CLI before the policy pack starts, with a line that names neither the key nor the fix (issue #49).
// The CLI asks this host for the program's plugins before it reads that file, so here, when the CLI that
// started this host names such a file for the project's pack (policy/), the project's checker
// (`python -m policy.config_file`) says what is wrong: file, key path and fix. A file the CLI can parse costs
// no process here: the pack itself judges it as it starts (policy/config_file.py, refuse_at_start).
//
// The project's pack is policy/ beside the program (Pulumi.yaml's `main:`), which is also where Pulumi.yaml
// is in the repo; the local demo's workspace (.state/local/<stack>) has only a Pulumi.yaml whose `main:` is
// the repo, and looking beside that Pulumi.yaml skipped the check there in silence (issue #62).

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
)

// flagValues is every value of a flag in `--flag value` or `--flag=value` form, in order.
func flagValues(args []string, flag string) []string {
	var out []string
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			out = append(out, args[i+1])
		} else if v, ok := strings.CutPrefix(a, flag+"="); ok {
			out = append(out, v)
		}
	}
	return out
}

// resolved is path from dir, absolute and with symlinks followed where they can be.
func resolved(dir, path string) string {
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		return real
	}
	return filepath.Clean(path)
}

// projectDir is the folder that holds the project's policy pack (policy/PulumiPolicy.yaml): the program's
// folder, else Pulumi.yaml's; "" when neither does.
func projectDir(info *pulumirpc.ProgramInfo) string {
	for _, dir := range []string{info.GetProgramDirectory(), info.GetRootDirectory()} {
		if dir == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "policy", "PulumiPolicy.yaml")); err == nil {
			return dir
		}
	}
	return ""
}

// unparsable are the policy config files for the project's pack that the CLI would fail to read as JSON.
func unparsable(args []string, cwd, project string) []string {
	packs, configs := flagValues(args, "--policy-pack"), flagValues(args, "--policy-pack-config")
	ours := resolved(project, "policy")
	var out []string
	for i, c := range configs {
		if len(packs) == len(configs) && resolved(cwd, packs[i]) != ours {
			continue // another pack's file: the CLI pairs them in order
		}
		path := resolved(cwd, c)
		raw, err := os.ReadFile(path)
		var doc any
		if err != nil || json.Unmarshal(raw, &doc) != nil {
			out = append(out, path)
		}
	}
	return out
}

// policyConfigProblem is the checker's message for a policy config file the CLI that started this host
// cannot parse; nil when there is none, or when the CLI's arguments cannot be read (not Linux).
func policyConfigProblem(info *pulumirpc.ProgramInfo) error {
	ppid := os.Getppid()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", ppid))
	if err != nil {
		return nil
	}
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", ppid))
	if err != nil {
		return nil
	}
	args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	project := projectDir(info)
	if project == "" {
		return nil
	}
	bad := unparsable(args, cwd, project)
	if len(bad) == 0 {
		return nil
	}
	bin, env, err := python(info)
	if err != nil {
		return nil
	}
	cmd := exec.Command(bin, append([]string{"-m", "policy.config_file"}, bad...)...)
	cmd.Dir = project // `python -m policy.config_file` imports the project's policy package from here
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err == nil {
		return nil
	}
	return fmt.Errorf("the policy pack's config is refused (python -m policy.config_file):\n%s", strings.TrimSpace(string(out)))
}
