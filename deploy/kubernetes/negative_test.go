package kubernetes

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// variant is a deep copy of m that mutate may change; the config can be
// changed through setConfig.
func variant(t *testing.T, m *manifests, mutate func(v *manifests)) *workload {
	t.Helper()
	v := &manifests{dir: m.dir, namespaces: m.namespaces, serviceAccounts: m.serviceAccounts, configMaps: map[string]*corev1.ConfigMap{}}
	for k, cm := range m.configMaps {
		v.configMaps[k] = cm.DeepCopy()
	}
	for _, s := range m.services {
		v.services = append(v.services, s.DeepCopy())
	}
	for _, d := range m.deployments {
		v.deployments = append(v.deployments, d.DeepCopy())
	}
	for _, p := range m.pdbs {
		v.pdbs = append(v.pdbs, p.DeepCopy())
	}
	for _, n := range m.netpols {
		v.netpols = append(v.netpols, n.DeepCopy())
	}
	mutate(v)
	w, err := v.workload()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// setConfig changes the config file in v's ConfigMap.
func setConfig(t *testing.T, v *manifests, change func(tree map[string]any)) {
	t.Helper()
	w, err := v.workload()
	if err != nil {
		t.Fatal(err)
	}
	f := w.fs.files[w.configPath]
	change(w.cfg.tree)
	b, err := yaml.Marshal(w.cfg.tree)
	if err != nil {
		t.Fatal(err)
	}
	v.configMaps[f.src.name].Data[f.src.key] = string(b)
}

func dep(v *manifests) *appsv1.Deployment { return v.deployments[0] }
func pod(v *manifests) *corev1.PodSpec    { return &v.deployments[0].Spec.Template.Spec }
func ctr(v *manifests) *corev1.Container  { return &v.deployments[0].Spec.Template.Spec.Containers[0] }

func volume(v *manifests, name string) *corev1.Volume {
	for i := range pod(v).Volumes {
		if pod(v).Volumes[i].Name == name {
			return &pod(v).Volumes[i]
		}
	}
	panic("no volume " + name)
}

func ptr[T any](v T) *T { return &v }

// TestChecksFail: each check finds what it is there to find. Every case
// breaks one thing in a copy of the base and names the problem it expects.
func TestChecksFail(t *testing.T) {
	m := buildAndDecode(t, "base")
	base := kustomizations[0]
	if w := variant(t, m, func(*manifests) {}); len(m.problems(base, w)) > 0 {
		t.Fatalf("the unchanged base has problems: %q", m.problems(base, w))
	}
	for _, c := range []struct {
		name   string
		mutate func(t *testing.T, v *manifests)
		want   string
	}{
		{"readiness probe on the gRPC port", func(t *testing.T, v *manifests) {
			ctr(v).ReadinessProbe.HTTPGet.Port = intstr.FromString("grpc")
		}, "readinessProbe: port grpc is not 7701"},
		{"probe in plain HTTP while tls is on", func(t *testing.T, v *manifests) {
			ctr(v).StartupProbe.HTTPGet.Scheme = corev1.URISchemeHTTP
		}, "startupProbe: scheme HTTP, but cardsignd's HTTP listener speaks HTTPS"},
		{"probe in HTTPS while tls is off", func(t *testing.T, v *manifests) {
			setConfig(t, v, func(tree map[string]any) { delete(tree, "tls") })
		}, "livenessProbe: scheme HTTPS, but cardsignd's HTTP listener speaks HTTP"},
		{"readiness on signing's /readyz", func(t *testing.T, v *manifests) {
			ctr(v).ReadinessProbe.HTTPGet.Path = "/readyz"
		}, `readinessProbe: path "/readyz", want /readyz/documents`},
		{"liveness on /readyz", func(t *testing.T, v *manifests) {
			ctr(v).LivenessProbe.HTTPGet.Path = "/readyz"
		}, `livenessProbe: path "/readyz", want /healthz`},
		{"http_addr moved", func(t *testing.T, v *manifests) {
			setConfig(t, v, func(tree map[string]any) { tree["http_addr"] = "0.0.0.0:8443" })
		}, "startupProbe: port https is not 8443"},
		{"container port cardsignd does not listen on", func(t *testing.T, v *manifests) {
			ctr(v).Ports = append(ctr(v).Ports, corev1.ContainerPort{Name: "debug", ContainerPort: 6060})
		}, "container port debug (6060): cardsignd does not listen there"},
		{"three replicas on SQLite", func(t *testing.T, v *manifests) {
			setConfig(t, v, func(tree map[string]any) { delete(tree, "store") })
		}, "replicas: 3, but store.url is not a PostgreSQL URL"},
		{"no anti-affinity", func(t *testing.T, v *manifests) {
			pod(v).Affinity = nil
		}, "without pod anti-affinity on kubernetes.io/hostname"},
		{"surging rollout under required anti-affinity", func(t *testing.T, v *manifests) {
			dep(v).Spec.Strategy.RollingUpdate.MaxSurge = ptr(intstr.FromInt32(1))
		}, "set maxSurge: 0"},
		{"writable root filesystem", func(t *testing.T, v *manifests) {
			ctr(v).SecurityContext.ReadOnlyRootFilesystem = ptr(false)
		}, "readOnlyRootFilesystem: true"},
		{"root", func(t *testing.T, v *manifests) {
			ctr(v).SecurityContext.RunAsUser = ptr(int64(0))
		}, "runAsUser: 65532"},
		{"a capability added", func(t *testing.T, v *manifests) {
			ctr(v).SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"}
		}, "capabilities: drop [ALL], add none"},
		{"no seccomp profile", func(t *testing.T, v *manifests) {
			ctr(v).SecurityContext.SeccompProfile = nil
			pod(v).SecurityContext.SeccompProfile = nil
		}, "seccompProfile: RuntimeDefault"},
		{"grace period within shutdown_timeout", func(t *testing.T, v *manifests) {
			pod(v).TerminationGracePeriodSeconds = ptr(int64(30))
		}, "terminationGracePeriodSeconds 30s is not more than shutdown_timeout plus the preStop pause (35s)"},
		{"no memory limit", func(t *testing.T, v *manifests) {
			delete(ctr(v).Resources.Limits, corev1.ResourceMemory)
		}, "resources: memory needs a request and a limit"},
		{"password in store.url", func(t *testing.T, v *manifests) {
			setConfig(t, v, func(tree map[string]any) {
				tree["store"].(map[string]any)["url"] = "postgres://cardsign:hunter2@db:5432/cardsign"
			})
		}, "store.url carries a password"},
		{"no password at all", func(t *testing.T, v *manifests) {
			ctr(v).Env = slices.DeleteFunc(ctr(v).Env, func(e corev1.EnvVar) bool { return e.Name == "PGPASSWORD" })
		}, "neither store.password_file nor PGPASSWORD"},
		{"PGPASSWORD as a literal", func(t *testing.T, v *manifests) {
			for i := range ctr(v).Env {
				if ctr(v).Env[i].Name == "PGPASSWORD" {
					ctr(v).Env[i] = corev1.EnvVar{Name: "PGPASSWORD", Value: "hunter2"}
				}
			}
		}, "PGPASSWORD: take it from a Secret"},
		{"TLS secret not mounted", func(t *testing.T, v *manifests) {
			ctr(v).VolumeMounts = slices.DeleteFunc(ctr(v).VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.Name == "tls" })
		}, "tls.key_file /etc/cardsignd/tls/tls.key: no volume mount provides this file"},
		{"TLS key not among the Secret's items", func(t *testing.T, v *manifests) {
			volume(v, "tls").Secret.Items = volume(v, "tls").Secret.Items[:1]
		}, "tls.key_file /etc/cardsignd/tls/tls.key: no volume mount provides this file"},
		{"database CA not mounted", func(t *testing.T, v *manifests) {
			volume(v, "db").Secret.Items = []corev1.KeyToPath{{Key: "other.crt", Path: "other.crt"}}
		}, "store.url sslrootcert /etc/cardsignd/db/ca.crt: no volume mount provides this file"},
		{"TLS key readable by root only", func(t *testing.T, v *manifests) {
			pod(v).SecurityContext.FSGroup = nil
			volume(v, "tls").Secret.DefaultMode = ptr(int32(0o400))
		}, "tls.key_file /etc/cardsignd/tls/tls.key: user 65532 (groups 65532 []) cannot read it: kubelet leaves it root's, group 0, mode 0400"},
		{"data directory at the emptyDir's mount point", func(t *testing.T, v *manifests) {
			ctr(v).Args = []string{"--config", "/etc/cardsignd/cardsignd.yaml", "--data-dir", "/var/lib/cardsignd"}
		}, "data_dir /var/lib/cardsignd: is the mount point of an emptyDir or claim, which kubelet makes group- or world-writable"},
		{"data directory on the read-only root", func(t *testing.T, v *manifests) {
			ctr(v).Args = []string{"--config", "/etc/cardsignd/cardsignd.yaml", "--data-dir", "/data"}
		}, "data_dir /data: not in an emptyDir or a claim: the root filesystem is read-only"},
		{"no /tmp", func(t *testing.T, v *manifests) {
			ctr(v).VolumeMounts = slices.DeleteFunc(ctr(v).VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.MountPath == "/tmp" })
		}, "/tmp: mount an emptyDir there"},
		{"a path in a field the test does not know", func(t *testing.T, v *manifests) {
			setConfig(t, v, func(tree map[string]any) {
				tree["pkcs11"] = map[string]any{"module": "/usr/lib/softhsm/libsofthsm2.so"}
			})
		}, "pkcs11.module: /usr/lib/softhsm/libsofthsm2.so is a path this test does not know"},
		{"Service selecting nothing", func(t *testing.T, v *manifests) {
			v.services[0].Spec.Selector = map[string]string{"app.kubernetes.io/name": "cardsign"}
		}, "does not select the pod"},
		{"Service to a port nobody listens on", func(t *testing.T, v *manifests) {
			for _, s := range v.services {
				if s.Name == "cardsignd-jwks" {
					s.Spec.Ports[0].TargetPort = intstr.FromInt32(7702)
				}
			}
		}, "Service cardsignd-jwks: targetPort 7702 is not cardsignd's port 7701"},
		{"headless Service with a cluster IP", func(t *testing.T, v *manifests) {
			for _, s := range v.services {
				if s.Name == "cardsignd-grpc-headless" {
					s.Spec.ClusterIP = ""
				}
			}
		}, `Service cardsignd-grpc-headless: clusterIP ""`},
		{"PDB that blocks every drain", func(t *testing.T, v *manifests) {
			v.pdbs[0].Spec = policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr(intstr.FromInt32(3)), Selector: v.pdbs[0].Spec.Selector}
		}, "minAvailable 3: want a number from 1 to replicas-1 (2)"},
		{"NetworkPolicy without DNS", func(t *testing.T, v *manifests) {
			v.netpols[0].Spec.Egress = v.netpols[0].Spec.Egress[1:]
		}, "no egress to 53/UDP for DNS"},
		{"NetworkPolicy closed to pipelines", func(t *testing.T, v *manifests) {
			v.netpols[0].Spec.Ingress = v.netpols[0].Spec.Ingress[1:]
		}, "no ingress to port 7700"},
		{"NetworkPolicy without the database", func(t *testing.T, v *manifests) {
			setConfig(t, v, func(tree map[string]any) {
				tree["store"].(map[string]any)["url"] = "postgres://cardsign@db:6432/cardsign?sslmode=verify-full&sslrootcert=/etc/cardsignd/db/ca.crt"
			})
		}, "no egress to 6432/TCP for PostgreSQL"},
		{"NetworkPolicy ingress only", func(t *testing.T, v *manifests) {
			v.netpols[0].Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		}, "policyTypes [Ingress, Egress]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var v *manifests
			w := variant(t, m, func(x *manifests) { v = x; c.mutate(t, x) })
			p := v.problems(base, w)
			if !slices.ContainsFunc(p, func(s string) bool { return strings.Contains(s, c.want) }) {
				t.Fatalf("want a problem containing %q, got %q", c.want, p)
			}
		})
	}

	t.Run("file keys with several replicas", func(t *testing.T) {
		w := variant(t, m, func(*manifests) {})
		if p := checkSharedKeys(w.deployment, w.cfg); len(p) != 1 || !strings.Contains(p[0], "out of the other replicas' reach") {
			t.Fatalf("got %q", p)
		}
		w = variant(t, m, func(v *manifests) { dep(v).Spec.Replicas = ptr(int32(1)) })
		if p := checkSharedKeys(w.deployment, w.cfg); len(p) != 0 {
			t.Fatalf("one replica with file keys: %q", p)
		}
	})
}

// TestCheckConfigFails: the pod's files, laid out as kubelet lays them,
// make the real `cardsignd --check-config` fail where the pod would fail.
// Two cases show why the manifests are as they are: the data directory
// below the emptyDir's mount point, and PGPASSWORD rather than
// store.password_file.
func TestCheckConfigFails(t *testing.T) {
	bin := cardsigndBinary(t)
	m := buildAndDecode(t, "base")
	passwordFile := func(t *testing.T, v *manifests) {
		db := volume(v, "db").Secret
		db.DefaultMode = ptr(int32(0o400))
		db.Items = append(db.Items, corev1.KeyToPath{Key: "password", Path: "password"})
		setConfig(t, v, func(tree map[string]any) {
			tree["store"].(map[string]any)["password_file"] = "/etc/cardsignd/db/password"
		})
	}
	for _, c := range []struct {
		name   string
		mutate func(t *testing.T, v *manifests)
		want   []string // in the output of --check-config
		asPod  []string // more, when it ran as the pod's user (the test runs as root)
	}{
		{"data directory at the emptyDir's mount point", func(t *testing.T, v *manifests) {
			ctr(v).Args = []string{"--config", "/etc/cardsignd/cardsignd.yaml", "--data-dir", "/var/lib/cardsignd"}
		}, []string{"data_dir: ", "/var/lib/cardsignd has mode 0777 (group- or world-writable)"}, nil},
		{"password file from a Secret, defaultMode 0400 and fsGroup", passwordFile,
			[]string{"store.password_file: ", "has mode 0440, which lets group or others read the database password"}, nil},
		{"password file from a Secret, defaultMode 0400 without fsGroup", func(t *testing.T, v *manifests) {
			passwordFile(t, v)
			pod(v).SecurityContext.FSGroup = nil
		}, nil, []string{"store.password_file: ", "/etc/cardsignd/db/password: permission denied"}},
		{"TLS key not among the Secret's items", func(t *testing.T, v *manifests) {
			volume(v, "tls").Secret.Items = volume(v, "tls").Secret.Items[:1]
		}, []string{"tls.key_file: stat ", "/etc/cardsignd/tls/tls.key: no such file or directory"}, nil},
		{"no tls while listening beyond loopback", func(t *testing.T, v *manifests) {
			setConfig(t, v, func(tree map[string]any) { delete(tree, "tls") })
		}, []string{"grpc_addr: 0.0.0.0:7700 is not a loopback address: listening beyond this machine requires TLS"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := variant(t, m, func(v *manifests) { c.mutate(t, v) })
			res := checkConfig(t, bin, w)
			want := c.want
			if res.asPod {
				want = append(want, c.asPod...)
			} else if len(c.want) == 0 {
				t.Skip("needs root, to run --check-config as the pod's user")
			}
			if res.exit != 1 {
				t.Errorf("exit %d, want 1", res.exit)
			}
			for _, s := range want {
				if !strings.Contains(res.output, s) {
					t.Errorf("want %q in the output:\n%s", s, res.output)
				}
			}
			t.Logf("%s", res.output)
			if strings.Contains(res.output, "store.url: cannot connect") {
				t.Errorf("--check-config reached the database: the problem above was not found first\n%s", res.output)
			}
		})
	}
}
