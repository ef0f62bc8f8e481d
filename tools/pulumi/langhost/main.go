// Command pulumi-language-python is trainstack's own Python language host for the Pulumi engine.
//
// Why it exists: Pulumi's own language host lives in a Go module without release tags, and the Go
// module proxy reachable from these machines refuses the pseudo-versions that would name it, so it
// cannot be built offline. This host implements the part of the LanguageRuntime gRPC contract that a
// Python project managed with pip or uv needs: running the program (through the
// pulumi-language-python-exec helper shipped in the Pulumi SDK module), reporting the resource plugins its
// packages declare, and running Python plugins such as policy packs. With the `toolchain: uv` runtime option
// it finds the virtualenv where Pulumi's own host does and installs dependencies with `uv sync --frozen`
// (the lock is the only source of versions); with pip, scripts/bootstrap owns the virtualenv.
//
// Like Pulumi's own plugins it exits when the engine that started it goes away: rpcutil.Healthcheck (Go SDK,
// sdk/go/common/util/rpcutil/health.go) asks the engine's health service every TRAINSTACK_ENGINE_CHECK_S
// seconds (default 10; Pulumi's plugins wait 5 minutes) and cancels the host's context when it fails; the
// program or policy pack it runs is killed with it, and the server stops.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// preloadFunction is the Invoke that makes the engine start the default `pulumi-python` provider (the host
// of dynamic providers) before the program registers anything: providers/preload.py explains it, and the
// program sends it again with the modules to import. The same string is in providers/preload.py.
const preloadFunction = "pulumi-python:dynamic:trainstackPreload"

// exitedAfterUserMessage is the exit code the exec helper uses after it already printed the error.
const exitedAfterUserMessage = 32

// engineCheckEnv names the seconds between two health checks of the engine; the same variable is read by
// the dynamic-provider host (tools/pulumi/dynhost).
const engineCheckEnv = "TRAINSTACK_ENGINE_CHECK_S"

type host struct {
	pulumirpc.UnimplementedLanguageRuntimeServer
	engineAddress string
	execHelper    string
	// life is cancelled when the engine goes away: every program or plugin this host runs dies with it.
	life context.Context
}

// engineCheckInterval reads engineCheckEnv: 10 s unless set, from 0.05 s to an hour.
func engineCheckInterval() (time.Duration, error) {
	raw := strings.TrimSpace(os.Getenv(engineCheckEnv))
	if raw == "" {
		return 10 * time.Second, nil
	}
	s, err := strconv.ParseFloat(raw, 64)
	if err != nil || !(s >= 0.05 && s <= 3600) {
		return 0, fmt.Errorf("%s=%q: expected seconds between engine health checks, from 0.05 to 3600 (unset it for the default, 10)", engineCheckEnv, raw)
	}
	return time.Duration(s * float64(time.Second)), nil
}

// bound returns a context that ends with ctx or with the host's life, whichever ends first.
func (h *host) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(h.life, cancel)
	return ctx, func() { stop(); cancel() }
}

func main() {
	engine := ""
	for _, a := range os.Args[1:] {
		if !strings.HasPrefix(a, "-") {
			engine = a // the engine passes its address as the last positional argument
		}
	}
	self, err := os.Executable()
	if err != nil {
		fatal(err)
	}
	interval, err := engineCheckInterval()
	if err != nil {
		fatal(err)
	}
	life, die := context.WithCancel(context.Background())
	defer die()
	cancelServe := make(chan bool)
	// The engine stops a plugin with SIGINT to its process group and kills it 5 s later if it is still there
	// (the Go SDK's sdk/go/common/resource/plugin/plugin.go). A process started with SIGINT ignored (a job
	// that a shell without job control started in the background: `nohup cmd &`) keeps it ignored across
	// exec, and so did this host and the Python it starts: every close of a language host waited the 5 s
	// (issue #47: ~230 a CI run, started that way). signal.Notify takes SIGINT back from "ignored"; what
	// this host starts afterwards gets the default action again, as when SIGINT was never ignored.
	interrupted := make(chan os.Signal, 1)
	signal.Notify(interrupted, os.Interrupt)
	go func() {
		<-interrupted
		die() // the programs and plugins this host runs end with it (their commands' context)
	}()
	go func() {
		<-life.Done()
		close(cancelServe)
	}()
	if engine != "" {
		gone := func() {
			if life.Err() == nil { // not a check cut short by the host's own end (an interrupt)
				fmt.Fprintf(os.Stderr, "pulumi-language-python: the engine at %s is gone; exiting\n", engine)
			}
			die()
		}
		if err := rpcutil.Healthcheck(life, engine, interval, gone); err != nil {
			fatal(fmt.Errorf("could not start the engine health check: %w", err))
		}
	}
	h := &host{engineAddress: engine, execHelper: filepath.Join(filepath.Dir(self), "pulumi-language-python-exec"), life: life}
	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Cancel: cancelServe,
		Init: func(srv *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(srv, h)
			return nil
		},
		Options: rpcutil.OpenTracingServerInterceptorOptions(nil),
	})
	if err != nil {
		fatal(err)
	}
	fmt.Printf("%d\n", handle.Port)
	if err := <-handle.Done; err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "fatal: %v\n", err)
	os.Exit(1)
}

func (h *host) Handshake(_ context.Context, req *pulumirpc.LanguageHandshakeRequest) (*pulumirpc.LanguageHandshakeResponse, error) {
	if req.GetEngineAddress() != "" {
		h.engineAddress = req.GetEngineAddress()
	}
	return &pulumirpc.LanguageHandshakeResponse{}, nil
}

func (h *host) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version}, nil
}

func (h *host) Cancel(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
	return &emptypb.Empty{}, nil
}

// Runtime option values of `toolchain` this host understands (Pulumi's own host also knows poetry).
const (
	toolchainPip = "pip"
	toolchainUv  = "uv"
)

// toolchain returns the `toolchain` runtime option ("pip" when unset), or an error naming the fix.
func toolchain(info *pulumirpc.ProgramInfo) (string, error) {
	tc := info.GetOptions().GetFields()["toolchain"].GetStringValue()
	switch tc {
	case "", toolchainPip:
		return toolchainPip, nil
	case toolchainUv:
		return toolchainUv, nil
	}
	return "", fmt.Errorf("runtime option toolchain: %q is not supported by trainstack's language host; "+
		"use \"uv\" or \"pip\" in Pulumi.yaml", tc)
}

// searchUp returns the nearest directory at or above dir that holds name, or "".
func searchUp(dir, name string) string {
	for {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// virtualenv resolves the `virtualenv` runtime option against the project (or policy pack) root. Without
// the option, toolchain uv uses what Pulumi's uv toolchain (sdk/python/toolchain/uv.go) uses: `.venv` beside
// the nearest uv.lock above the root, else beside the nearest pyproject.toml, else in the root; pip falls
// back to PULUMI_RUNTIME_VIRTUALENV.
func virtualenv(info *pulumirpc.ProgramInfo) string {
	if info == nil {
		return os.Getenv("PULUMI_RUNTIME_VIRTUALENV")
	}
	venv := info.GetOptions().GetFields()["virtualenv"].GetStringValue()
	if venv == "" {
		if tc, _ := toolchain(info); tc != toolchainUv {
			return os.Getenv("PULUMI_RUNTIME_VIRTUALENV")
		}
		root := info.GetRootDirectory()
		dir := searchUp(root, "uv.lock")
		if dir == "" {
			dir = searchUp(root, "pyproject.toml")
		}
		if dir == "" {
			dir = root
		}
		return filepath.Join(dir, ".venv")
	}
	if !filepath.IsAbs(venv) {
		venv = filepath.Join(info.GetRootDirectory(), venv)
	}
	return venv
}

// python returns the interpreter to run and the environment additions that select the virtualenv.
func python(info *pulumirpc.ProgramInfo) (string, []string, error) {
	if _, err := toolchain(info); err != nil {
		return "", nil, err
	}
	venv := virtualenv(info)
	if venv == "" {
		cmd := os.Getenv("PULUMI_PYTHON_CMD")
		if cmd == "" {
			cmd = "python3"
		}
		return cmd, nil, nil
	}
	bin := filepath.Join(venv, "bin", "python")
	if _, err := os.Stat(bin); err != nil {
		return "", nil, fmt.Errorf("the virtualenv %q has no bin/python: run scripts/bootstrap to create it", venv)
	}
	path := filepath.Join(venv, "bin") + string(os.PathListSeparator) + os.Getenv("PATH")
	return bin, []string{"PATH=" + path, "VIRTUAL_ENV=" + venv, "PULUMI_RUNTIME_VIRTUALENV=" + venv}, nil
}

type pluginManifest struct {
	Resource bool   `json:"resource"`
	Name     string `json:"name"`
	Version  string `json:"version"`
	Server   string `json:"server"`
}

// declaredPlugins reads the pulumi-plugin.json manifests that Pulumi packages install beside their code.
func declaredPlugins(info *pulumirpc.ProgramInfo) ([]pluginManifest, error) {
	venv := virtualenv(info)
	if venv == "" {
		return nil, nil
	}
	paths, err := filepath.Glob(filepath.Join(venv, "lib", "python*", "site-packages", "*", "pulumi-plugin.json"))
	if err != nil {
		return nil, err
	}
	var out []pluginManifest
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var m pluginManifest
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if m.Resource && m.Name != "" {
			if m.Version != "" && !strings.HasPrefix(m.Version, "v") {
				m.Version = "v" + m.Version
			}
			out = append(out, m)
		}
	}
	return out, nil
}

func (h *host) GetRequiredPlugins(_ context.Context, req *pulumirpc.GetRequiredPluginsRequest) (*pulumirpc.GetRequiredPluginsResponse, error) {
	if err := policyConfigProblem(req.GetInfo()); err != nil {
		return nil, err
	}
	ms, err := declaredPlugins(req.GetInfo())
	if err != nil {
		return nil, err
	}
	resp := &pulumirpc.GetRequiredPluginsResponse{}
	for _, m := range ms {
		resp.Plugins = append(resp.Plugins, &pulumirpc.PluginDependency{Name: m.Name, Kind: "resource", Version: m.Version, Server: m.Server})
	}
	return resp, nil
}

func (h *host) GetRequiredPackages(_ context.Context, req *pulumirpc.GetRequiredPackagesRequest) (*pulumirpc.GetRequiredPackagesResponse, error) {
	// First: the CLI reads the policy pack's config right after this answer (policyconfig.go).
	if err := policyConfigProblem(req.GetInfo()); err != nil {
		return nil, err
	}
	ms, err := declaredPlugins(req.GetInfo())
	if err != nil {
		return nil, err
	}
	resp := &pulumirpc.GetRequiredPackagesResponse{}
	for _, m := range ms {
		resp.Packages = append(resp.Packages, &pulumirpc.PackageDependency{Name: m.Name, Kind: "resource", Version: m.Version, Server: m.Server})
	}
	return resp, nil
}

// startDynamicProviders asks the engine, without waiting for the answer, to start the dynamic-provider
// host now: it then starts while Python is still importing pulumi for the program (~0.3 s), instead of
// after the program's first registration. Any answer is ignored, "not implemented" from a stock host too:
// the only effect wanted is the early start. Off with TRAINSTACK_EARLY_PROVIDER=0.
func startDynamicProviders(monitor string) {
	if monitor == "" || os.Getenv("TRAINSTACK_EARLY_PROVIDER") == "0" {
		return
	}
	go func() {
		conn, err := grpc.NewClient(monitor, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, _ = pulumirpc.NewResourceMonitorClient(conn).Invoke(ctx,
			&pulumirpc.ResourceInvokeRequest{Tok: preloadFunction, Args: &structpb.Struct{}})
	}()
}

func (h *host) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	startDynamicProviders(req.GetMonitorAddress())
	bin, env, err := python(req.GetInfo())
	if err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}
	// The exec helper expects a JSON object and a JSON list, never null.
	cfg := map[string]string{}
	for k, v := range req.GetConfig() {
		cfg[k] = v
	}
	config, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	secretKeys, err := json.Marshal(append([]string{}, req.GetConfigSecretKeys()...))
	if err != nil {
		return nil, err
	}
	program := req.GetProgram()
	if info := req.GetInfo(); info != nil && info.GetProgramDirectory() != "" {
		program = info.GetProgramDirectory()
	}
	args := []string{"-u", h.execHelper,
		"--monitor", req.GetMonitorAddress(), "--engine", h.engineAddress,
		"--project", req.GetProject(), "--stack", req.GetStack(), "--pwd", req.GetPwd(),
		"--dry_run", fmt.Sprintf("%t", req.GetDryRun()), "--parallel", fmt.Sprintf("%d", req.GetParallel()),
		"--organization", req.GetOrganization(), "--root_directory", req.GetInfo().GetRootDirectory(),
		program}
	args = append(args, req.GetArgs()...)
	ctx, cancel := h.bound(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = req.GetPwd()
	cmd.Env = append(append(os.Environ(), env...),
		"PULUMI_CONFIG="+string(config), "PULUMI_CONFIG_SECRET_KEYS="+string(secretKeys))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			// The exec helper reports its own failures through the engine (pulumi.log.error) before it
			// exits 1 (RunError) or 32 (unhandled exception), so the engine must not add a second message.
			if code := exit.ExitCode(); code == exitedAfterUserMessage || code == 1 {
				return &pulumirpc.RunResponse{Bail: true}, nil
			}
			return &pulumirpc.RunResponse{Error: fmt.Sprintf("Program exited with non-zero exit code: %d", exit.ExitCode())}, nil
		}
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}
	return &pulumirpc.RunResponse{}, nil
}

// streamWriter forwards a plugin's output to the engine as RunPlugin messages.
type streamWriter struct {
	mu     *sync.Mutex
	srv    pulumirpc.LanguageRuntime_RunPluginServer
	stderr bool
}

func (w streamWriter) Write(p []byte) (int, error) {
	data := append([]byte(nil), p...)
	msg := &pulumirpc.RunPluginResponse{Output: &pulumirpc.RunPluginResponse_Stdout{Stdout: data}}
	if w.stderr {
		msg = &pulumirpc.RunPluginResponse{Output: &pulumirpc.RunPluginResponse_Stderr{Stderr: data}}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.srv.Send(msg); err != nil {
		return 0, err
	}
	return len(p), nil
}

// RunPlugin runs a Python plugin (a policy pack, for trainstack) from its directory's __main__.py.
func (h *host) RunPlugin(req *pulumirpc.RunPluginRequest, srv pulumirpc.LanguageRuntime_RunPluginServer) error {
	bin, env, err := python(req.GetInfo())
	if err != nil {
		return err
	}
	program := req.GetProgram()
	if info := req.GetInfo(); info != nil && info.GetProgramDirectory() != "" {
		program = info.GetProgramDirectory()
	}
	ctx, cancel := h.bound(srv.Context())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-u", program}, req.GetArgs()...)...)
	cmd.Dir = req.GetPwd()
	cmd.Env = append(append(os.Environ(), req.GetEnv()...), env...)
	mu := &sync.Mutex{}
	cmd.Stdout = streamWriter{mu: mu, srv: srv}
	cmd.Stderr = streamWriter{mu: mu, srv: srv, stderr: true}
	code := int32(0)
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			return err
		}
		code = int32(exit.ExitCode())
	}
	return srv.Send(&pulumirpc.RunPluginResponse{Output: &pulumirpc.RunPluginResponse_Exitcode{Exitcode: code}})
}

func (h *host) InstallDependencies(req *pulumirpc.InstallDependenciesRequest, srv pulumirpc.LanguageRuntime_InstallDependenciesServer) error {
	info := req.GetInfo()
	tc, err := toolchain(info)
	if err != nil {
		return err
	}
	if tc != toolchainUv {
		// With pip, scripts/bootstrap owns .venv; say so rather than silently doing nothing.
		msg := "trainstack: with toolchain pip, dependencies are installed by scripts/bootstrap\n"
		return srv.Send(&pulumirpc.InstallDependenciesResponse{Stdout: []byte(msg)})
	}
	root := info.GetRootDirectory()
	if root == "" {
		root = req.GetDirectory()
	}
	lockDir := searchUp(root, "uv.lock")
	if lockDir == "" {
		return fmt.Errorf("toolchain uv: no uv.lock at or above %s; run `uv lock` in the project first", root)
	}
	if _, err := exec.LookPath("uv"); err != nil {
		return errors.New("toolchain uv: no `uv` on PATH; run scripts/bootstrap (it installs uv) or pip install uv")
	}
	// --frozen: install exactly what the lock says; never re-resolve (and rewrite the lock) behind a deploy.
	ctx, cancel := h.bound(srv.Context())
	defer cancel()
	cmd := exec.CommandContext(ctx, "uv", "sync", "--frozen")
	cmd.Dir = lockDir
	cmd.Env = append(os.Environ(), "UV_PROJECT_ENVIRONMENT="+virtualenv(info))
	mu := &sync.Mutex{}
	cmd.Stdout = installWriter{mu: mu, srv: srv}
	cmd.Stderr = installWriter{mu: mu, srv: srv, stderr: true}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("uv sync --frozen in %s: %w", lockDir, err)
	}
	return nil
}

// installWriter forwards uv's output to the engine as InstallDependencies messages.
type installWriter struct {
	mu     *sync.Mutex
	srv    pulumirpc.LanguageRuntime_InstallDependenciesServer
	stderr bool
}

func (w installWriter) Write(p []byte) (int, error) {
	data := append([]byte(nil), p...)
	msg := &pulumirpc.InstallDependenciesResponse{Stdout: data}
	if w.stderr {
		msg = &pulumirpc.InstallDependenciesResponse{Stderr: data}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.srv.Send(msg); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (h *host) RuntimeOptionsPrompts(context.Context, *pulumirpc.RuntimeOptionsRequest) (*pulumirpc.RuntimeOptionsResponse, error) {
	return &pulumirpc.RuntimeOptionsResponse{}, nil
}

func (h *host) About(_ context.Context, req *pulumirpc.AboutRequest) (*pulumirpc.AboutResponse, error) {
	bin, _, err := python(req.GetInfo())
	if err != nil {
		return nil, err
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return nil, err
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "Python ")
	return &pulumirpc.AboutResponse{Executable: bin, Version: v}, nil
}

func (h *host) GetProgramDependencies(context.Context, *pulumirpc.GetProgramDependenciesRequest) (*pulumirpc.GetProgramDependenciesResponse, error) {
	return &pulumirpc.GetProgramDependenciesResponse{}, nil
}

var _ io.Writer = streamWriter{}
