package kubernetes

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The pod's files as kubelet lays them out, for the files cardsignd's config
// names. What kubelet does (pkg/volume in kubernetes/kubernetes):
//
//   - configMap and secret volumes: each key is a file owned by root, with
//     the item's mode, else the volume's defaultMode (default 0644). With a
//     pod fsGroup, SetVolumeOwnership makes the file's group fsGroup and ORs
//     0440 into the mode of these read-only volumes: defaultMode 0400
//     becomes 0440 (kubernetes/kubernetes#57923). Without fsGroup the file
//     stays root's: a non-root user reads it only through the "other" bits.
//   - emptyDir: a directory of mode 0777 (emptyDir's setupDir).
//   - persistentVolumeClaim: with fsGroup, SetVolumeOwnership makes its root
//     group fsGroup and group-writable (2770), which cardsignd refuses for a
//     data_dir as it refuses 0777; it is modelled as an emptyDir (writable,
//     its mount point unfit as data_dir).
//   - subPath: the one file of the volume at that path, at mountPath.

// fileSource says where a file in the pod comes from.
type fileSource struct {
	kind   string // configMap or secret
	name   string // of the ConfigMap or Secret
	key    string
	volume string
}

type podFile struct {
	src  fileSource
	mode os.FileMode // as kubelet leaves it
	gid  int64       // the group owner (fsGroup, else root's 0); the owner is root
	data []byte      // a ConfigMap's contents (Secrets are not in the build)
}

type podFS struct {
	files     map[string]podFile // by path in the container
	emptyDirs []string           // mount paths of emptyDirs and claims
	uid       int64              // the container's user (-1: unknown)
	gid       int64              // its primary group (-1: unknown)
	groups    []int64            // its supplementary groups (fsGroup, supplementalGroups)
	problems  []string           // mounts this model cannot follow
}

func newPodFS(spec *corev1.PodSpec, c *corev1.Container, configMaps map[string]*corev1.ConfigMap) podFS {
	fs := podFS{files: map[string]podFile{}, uid: -1, gid: -1}
	psc := spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	sc := c.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	if v := effective(sc.RunAsUser, psc.RunAsUser); v != nil {
		fs.uid = *v
	}
	if v := effective(sc.RunAsGroup, psc.RunAsGroup); v != nil {
		fs.gid = *v
	}
	if psc.FSGroup != nil {
		fs.groups = append(fs.groups, *psc.FSGroup)
	}
	fs.groups = append(fs.groups, psc.SupplementalGroups...)

	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	for _, vm := range c.VolumeMounts {
		v, ok := volumes[vm.Name]
		if !ok {
			fs.problems = append(fs.problems, fmt.Sprintf("volumeMount %s: no such volume", vm.Name))
			continue
		}
		if !path.IsAbs(vm.MountPath) {
			fs.problems = append(fs.problems, fmt.Sprintf("volumeMount %s: mountPath %q is not absolute", vm.Name, vm.MountPath))
			continue
		}
		type item struct {
			key, path string
			mode      *int32
		}
		var (
			items       []item
			defaultMode *int32
			src         = fileSource{volume: v.Name}
			data        map[string]string
		)
		switch {
		case v.EmptyDir != nil:
			if vm.SubPath != "" {
				fs.problems = append(fs.problems, fmt.Sprintf("volumeMount %s: subPath of an emptyDir is not modelled", vm.Name))
			}
			fs.emptyDirs = append(fs.emptyDirs, path.Clean(vm.MountPath))
			continue
		case v.PersistentVolumeClaim != nil:
			if vm.SubPath != "" || vm.ReadOnly {
				fs.problems = append(fs.problems, fmt.Sprintf("volumeMount %s: a claim mounted read-only or by subPath is not modelled", vm.Name))
			}
			fs.emptyDirs = append(fs.emptyDirs, path.Clean(vm.MountPath))
			continue
		case v.ConfigMap != nil:
			src.kind, src.name, defaultMode = "configMap", v.ConfigMap.Name, v.ConfigMap.DefaultMode
			cm, ok := configMaps[v.ConfigMap.Name]
			if !ok {
				fs.problems = append(fs.problems, fmt.Sprintf("volume %s: ConfigMap %s is not in the build", v.Name, v.ConfigMap.Name))
				continue
			}
			data = cm.Data
			for _, it := range v.ConfigMap.Items {
				items = append(items, item{it.Key, it.Path, it.Mode})
			}
			if len(items) == 0 {
				for _, k := range sortedKeys(cm.Data) {
					items = append(items, item{key: k, path: k})
				}
			}
		case v.Secret != nil:
			src.kind, src.name, defaultMode = "secret", v.Secret.SecretName, v.Secret.DefaultMode
			for _, it := range v.Secret.Items {
				items = append(items, item{it.Key, it.Path, it.Mode})
			}
			if len(items) == 0 {
				fs.problems = append(fs.problems, fmt.Sprintf("volume %s: Secret %s is not in the build, so its files are known only from items: list them", v.Name, v.Secret.SecretName))
				continue
			}
		case v.Projected != nil && len(v.Projected.Sources) == 1 && v.Projected.Sources[0].ServiceAccountToken != nil:
			// A projected service account token: one file, the token.
			src.kind, src.name, defaultMode = "serviceAccountToken", v.Projected.Sources[0].ServiceAccountToken.Audience, v.Projected.DefaultMode
			items = append(items, item{key: "token", path: v.Projected.Sources[0].ServiceAccountToken.Path})
		default:
			fs.problems = append(fs.problems, fmt.Sprintf("volume %s: only emptyDir, persistentVolumeClaim, configMap, secret and projected service account token volumes are modelled", v.Name))
			continue
		}
		found := false
		for _, it := range items {
			mode := os.FileMode(0o644)
			if m := cmpPtr(it.mode, defaultMode); m != nil {
				mode = os.FileMode(*m) & os.ModePerm
			}
			f := podFile{src: src, mode: mode}
			f.src.key = it.key
			if psc.FSGroup != nil {
				f.mode |= 0o440
				f.gid = *psc.FSGroup
			}
			if data != nil {
				s, ok := data[it.key]
				if !ok {
					fs.problems = append(fs.problems, fmt.Sprintf("volume %s: ConfigMap %s has no key %s", v.Name, src.name, it.key))
				}
				f.data = []byte(s)
			}
			switch {
			case vm.SubPath == "":
				fs.files[path.Join(vm.MountPath, it.path)] = f
			case vm.SubPath == it.path:
				fs.files[path.Clean(vm.MountPath)] = f
				found = true
			}
		}
		if vm.SubPath != "" && !found {
			fs.problems = append(fs.problems, fmt.Sprintf("volumeMount %s: subPath %q is no file of the volume", vm.Name, vm.SubPath))
		}
	}
	return fs
}

func cmpPtr[T any](ps ...*T) *T {
	for _, p := range ps {
		if p != nil {
			return p
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// readable reports whether the container's user can read f.
func (fs podFS) readable(f podFile) bool {
	switch {
	case fs.uid == 0:
		return true
	case f.mode&0o004 != 0:
		return true
	case f.mode&0o040 != 0:
		return f.gid == fs.gid || slices.Contains(fs.groups, f.gid)
	}
	return false
}

// below is the emptyDir mount that dir lies in, or "".
func (fs podFS) below(dir string) (mount string, at bool) {
	dir = path.Clean(dir)
	for _, m := range fs.emptyDirs {
		if dir == m {
			return m, true
		}
		if strings.HasPrefix(dir, m+"/") {
			return m, false
		}
	}
	return "", false
}

// pathRef is one path cardsignd's config names.
type pathRef struct {
	field string // dotted, as --check-config names it
	path  string
	dir   bool
}

// Fields whose value is a file cardsignd reads, or a directory it uses
// (README, configuration table). Any other field holding an absolute path
// fails the test: a new path-valued setting must be added here.
var (
	fileFields = []string{"tls.cert_file", "tls.key_file", "tls.client_ca_file", "store.password_file", "pkcs11.pin_file",
		"hashivault.ca_file", "hashivault.auth.token_file", "hashivault.auth.secret_id_file", "hashivault.auth.jwt_file"}
	dirFields = []string{"data_dir", "keys.dir"}
	dirLists  = []string{"keys.import_dirs", "pkcs11.pin_source_dirs"}
	// libpq parameters of store.url that name files (pgx reads them).
	urlFileParams = []string{"sslrootcert", "sslcert", "sslkey"}
)

// configPaths lists every path the config names, with problems for paths
// in fields this test does not know.
func configPaths(cfg daemonConfig) (refs []pathRef, problems []string) {
	walkStrings(cfg.tree, "", func(field, v string) {
		list, _, isList := strings.Cut(field, "[")
		switch {
		case field == "store.url":
			u, err := url.Parse(v)
			if err != nil {
				problems = append(problems, fmt.Sprintf("store.url: %v", err))
				return
			}
			for _, p := range urlFileParams {
				if f := u.Query().Get(p); f != "" {
					refs = append(refs, pathRef{field: "store.url " + p, path: f})
				}
			}
		case !strings.HasPrefix(v, "/"):
		case slices.Contains(fileFields, field):
			refs = append(refs, pathRef{field: field, path: v})
		case slices.Contains(dirFields, field), isList && slices.Contains(dirLists, list):
			// data_dir and keys.dir are added below, after --data-dir.
			if field != "data_dir" && field != "keys.dir" {
				refs = append(refs, pathRef{field: field, path: v, dir: true})
			}
		default:
			problems = append(problems, fmt.Sprintf("%s: %s is a path this test does not know how to check (a PKCS#11 module must be in the image): teach configPaths", field, v))
		}
	})
	refs = append(refs, pathRef{field: "data_dir", path: cfg.dataDir, dir: true}, pathRef{field: "keys.dir", path: cfg.keysDir, dir: true})
	return refs, problems
}

func walkStrings(v any, field string, fn func(field, v string)) {
	switch t := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(t) {
			f := k
			if field != "" {
				f = field + "." + k
			}
			walkStrings(t[k], f, fn)
		}
	case []any:
		for i, e := range t {
			walkStrings(e, fmt.Sprintf("%s[%d]", field, i), fn)
		}
	case string:
		fn(field, t)
	}
}

// checkFiles: every file the config names is mounted and readable by the
// container's user; every directory cardsignd writes lies inside an
// emptyDir, below its mount point (which kubelet makes 0777, a mode
// cardsignd refuses for its data directory); /tmp is writable.
func checkFiles(w *workload) []string {
	refs, p := configPaths(w.cfg)
	for _, r := range refs {
		if !path.IsAbs(r.path) {
			p = append(p, fmt.Sprintf("%s: %q is relative: the image's working directory is not this config's business", r.field, r.path))
			continue
		}
		if r.dir {
			if r.field != "data_dir" && r.field != "keys.dir" {
				continue // read-only directories (import_dirs): not modelled
			}
			mount, at := w.fs.below(r.path)
			switch {
			case mount == "":
				p = append(p, fmt.Sprintf("%s %s: not in an emptyDir or a claim: the root filesystem is read-only", r.field, r.path))
			case at:
				p = append(p, fmt.Sprintf("%s %s: is the mount point of an emptyDir or claim, which kubelet makes group- or world-writable; cardsignd refuses a group- or world-writable %s: use a directory below it (cardsignd makes it 0700)", r.field, r.path, r.field))
			}
			continue
		}
		f, ok := w.fs.files[path.Clean(r.path)]
		if !ok {
			p = append(p, fmt.Sprintf("%s %s: no volume mount provides this file", r.field, r.path))
			continue
		}
		if !w.fs.readable(f) {
			p = append(p, fmt.Sprintf("%s %s: user %d (groups %d %v) cannot read it: kubelet leaves it root's, group %d, mode %04o", r.field, r.path, w.fs.uid, w.fs.gid, w.fs.groups, f.gid, f.mode))
		}
	}
	if m, at := w.fs.below("/tmp"); m == "" || !at {
		p = append(p, "/tmp: mount an emptyDir there (the root filesystem is read-only)")
	}
	return p
}

// checkResult is what `cardsignd --check-config` said.
type checkResult struct {
	exit     int
	output   string
	problems []string // the lines under "invalid configuration:"
	warnings []string // "warning: …" lines
	user     string
	asPod    bool // run as the pod's user and groups
}

// othersReach reports whether any user may walk down to dir (o+x on it and
// every directory above it), as the pod's user must.
func othersReach(dir string) bool {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

// checkConfig runs the real `cardsignd --check-config` on w's config with
// the pod's files laid out under a temporary root as kubelet would (modes,
// and, when the test runs as root, owner root, group fsGroup, run as the
// pod's user and groups, so the kernel decides what is readable). Paths in
// the config are rewritten to lie under that root, and data_dir is set to
// the --data-dir argument (--check-config does not take flags).
//
// store.url's host and port are replaced with a loopback port nothing
// listens on, so the check can only end with one problem, "cannot
// connect" at store.url: --check-config tries the database only after
// every other check passed (the file, every field, TLS material, the
// password file's mode, state directory modes, the rest of the URL, which
// pgx parses, reading sslrootcert). The connection itself (password,
// sslmode, schema) is not exercised here: a placeholder host is not a
// database. cmd/cardsignd's tests cover --check-config against a real
// PostgreSQL.
func checkConfig(t *testing.T, bin string, w *workload) checkResult {
	t.Helper()
	root, err := os.MkdirTemp("", "cardsignd-pod-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	// The pod's user walks from / to its files.
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	asRoot := os.Geteuid() == 0
	material := newSecretMaterial(t)
	for p, f := range w.fs.files {
		data := f.data
		if f.src.kind == "secret" {
			data = material.contents(f.src)
		}
		if p == w.configPath {
			data = rewriteConfig(t, w.cfg, root, unusedLoopbackPort(t))
		}
		dst := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dst, f.mode); err != nil {
			t.Fatal(err)
		}
		if asRoot {
			if err := os.Chown(dst, 0, int(f.gid)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, m := range w.fs.emptyDirs {
		dst := filepath.Join(root, filepath.FromSlash(m))
		if err := os.MkdirAll(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dst, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	// The binary, where the pod's user may run it.
	exe := filepath.Join(root, "cardsignd")
	if err := copyFile(bin, exe, 0o755); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(exe, "--check-config", filepath.Join(root, filepath.FromSlash(w.configPath)))
	cmd.Env = containerEnv(w.container)
	res := checkResult{user: fmt.Sprintf("uid %d, the test's own user", os.Geteuid())}
	if asRoot && w.fs.uid > 0 && othersReach(root) {
		res.asPod = true
		cred := &syscall.Credential{Uid: uint32(w.fs.uid), Gid: uint32(max(w.fs.gid, 0))}
		for _, g := range w.fs.groups {
			cred.Groups = append(cred.Groups, uint32(g))
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		res.user = fmt.Sprintf("uid %d, gid %d, groups %v, as the pod", cred.Uid, cred.Gid, cred.Groups)
	}
	out, err := cmd.CombinedOutput()
	res.output = string(out)
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		res.exit = ee.ExitCode()
	case err != nil:
		t.Fatalf("cardsignd --check-config: %v", err)
	}
	for _, line := range strings.Split(strings.TrimRight(res.output, "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "warning: "):
			res.warnings = append(res.warnings, line)
		case strings.HasPrefix(line, "  "):
			res.problems = append(res.problems, strings.TrimSpace(line))
		}
	}
	return res
}

// rewriteConfig is the config with every absolute path moved under root,
// data_dir set to the --data-dir argument, and store.url pointed at
// dbHostPort.
func rewriteConfig(t *testing.T, cfg daemonConfig, root, dbHostPort string) []byte {
	t.Helper()
	var tree map[string]any
	b, err := json.Marshal(cfg.tree)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &tree); err != nil {
		t.Fatal(err)
	}
	var rewrite func(v any) any
	rewrite = func(v any) any {
		switch t := v.(type) {
		case map[string]any:
			for k, e := range t {
				t[k] = rewrite(e)
			}
		case []any:
			for i, e := range t {
				t[i] = rewrite(e)
			}
		case string:
			if strings.HasPrefix(t, "/") {
				return filepath.Join(root, filepath.FromSlash(t))
			}
		}
		return v
	}
	rewrite(tree)
	tree["data_dir"] = filepath.Join(root, filepath.FromSlash(cfg.dataDir))
	if cfg.storeURL != "" {
		u, err := url.Parse(cfg.storeURL)
		if err != nil {
			t.Fatal(err)
		}
		u.Host = dbHostPort
		q := u.Query()
		for _, p := range urlFileParams {
			if f := q.Get(p); strings.HasPrefix(f, "/") {
				q.Set(p, filepath.Join(root, filepath.FromSlash(f)))
			}
		}
		u.RawQuery = q.Encode()
		tree["store"].(map[string]any)["url"] = u.String()
	}
	out, err := yaml.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// unusedLoopbackPort is a loopback address nothing listens on: a connection
// there is refused at once.
func unusedLoopbackPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// containerEnv is the container's environment as the pod would have it,
// with placeholders for Secret values.
func containerEnv(c *corev1.Container) []string {
	env := []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.SecretKeyRef != nil:
			env = append(env, e.Name+"=placeholder-"+e.ValueFrom.SecretKeyRef.Key)
		case e.ValueFrom.ResourceFieldRef != nil:
			if q, ok := c.Resources.Limits[corev1.ResourceName(strings.TrimPrefix(e.ValueFrom.ResourceFieldRef.Resource, "limits."))]; ok {
				env = append(env, e.Name+"="+strconv.FormatInt(q.Value(), 10))
			}
		}
	}
	return env
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// secretMaterial makes the contents of the Secrets the manifests mount but
// do not hold: for each Secret, a certificate (tls.crt, ca.crt, *.crt) and
// its key (tls.key, *.key), valid for a day, else a password.
type secretMaterial struct {
	t     *testing.T
	pairs map[string][2][]byte
}

func newSecretMaterial(t *testing.T) *secretMaterial {
	return &secretMaterial{t: t, pairs: map[string][2][]byte{}}
}

func (s *secretMaterial) contents(src fileSource) []byte {
	pair, ok := s.pairs[src.name]
	if !ok {
		pair = selfSigned(s.t, src.name)
		s.pairs[src.name] = pair
	}
	switch {
	case strings.HasSuffix(src.key, ".crt"), strings.HasSuffix(src.key, ".pem"):
		return pair[0]
	case strings.HasSuffix(src.key, ".key"):
		return pair[1]
	}
	return []byte("placeholder-password\n")
}

func selfSigned(t *testing.T, name string) [2][]byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		DNSNames:              []string{"cardsignd-grpc.cardsign.svc", "cardsignd-jwks.cardsign.svc"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return [2][]byte{
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}),
	}
}
