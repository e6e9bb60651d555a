package oidctest

// The claim sets below follow the platforms' documented ID tokens (values
// are made up); iss, iat, nbf and exp are left to Mint's defaults. Each call
// returns a fresh map a test may change.

// GitHubClaims is a GitHub Actions ID token of a tag push of
// acme/payments, running in the "production" environment, for audience aud.
func GitHubClaims(aud string) map[string]any {
	return map[string]any{
		"jti":                   "6b7f5a0e-9f4e-4c8e-9c1e-0d5c1f6b2a11",
		"sub":                   "repo:acme/payments:ref:refs/tags/v1.2.0",
		"aud":                   aud,
		"ref":                   "refs/tags/v1.2.0",
		"ref_type":              "tag",
		"sha":                   "2f1c0b7e4d3a59e8c6b1a0f9e8d7c6b5a4938271",
		"repository":            "acme/payments",
		"repository_id":         "74125896",
		"repository_owner":      "acme",
		"repository_owner_id":   "1342004",
		"repository_visibility": "private",
		"run_id":                "9876543210",
		"run_number":            "42",
		"run_attempt":           "1",
		"runner_environment":    "github-hosted",
		"actor":                 "octocat",
		"actor_id":              "583231",
		"workflow":              "release",
		"workflow_ref":          "acme/payments/.github/workflows/release.yml@refs/tags/v1.2.0",
		"workflow_sha":          "2f1c0b7e4d3a59e8c6b1a0f9e8d7c6b5a4938271",
		"job_workflow_ref":      "acme/payments/.github/workflows/release.yml@refs/tags/v1.2.0",
		"job_workflow_sha":      "2f1c0b7e4d3a59e8c6b1a0f9e8d7c6b5a4938271",
		"environment":           "production",
		"event_name":            "push",
		"head_ref":              "",
		"base_ref":              "",
	}
}

// GitLabClaims is a GitLab CI ID token of a tag pipeline of acme/payments
// (id_tokens: with aud), deploying to "production". runner_id is a JSON
// number, as GitLab sends it.
func GitLabClaims(aud string) map[string]any {
	return map[string]any{
		"jti":                   "c2b0f2de-8a5b-4c3e-b6b4-1f2e3d4c5b6a",
		"sub":                   "project_path:acme/payments:ref_type:tag:ref:v1.2.0",
		"aud":                   aud,
		"namespace_id":          "72",
		"namespace_path":        "acme",
		"project_id":            "20",
		"project_path":          "acme/payments",
		"project_visibility":    "private",
		"user_id":               "5",
		"user_login":            "alice",
		"user_email":            "alice@example.com",
		"user_identities":       []any{map[string]any{"provider": "github", "extern_uid": "2435223452345"}},
		"pipeline_id":           "574",
		"pipeline_source":       "push",
		"job_id":                "302",
		"ref":                   "v1.2.0",
		"ref_type":              "tag",
		"ref_path":              "refs/tags/v1.2.0",
		"ref_protected":         "true",
		"environment":           "production",
		"environment_protected": "true",
		"deployment_tier":       "production",
		"runner_id":             1,
		"runner_environment":    "gitlab-hosted",
		"sha":                   "2f1c0b7e4d3a59e8c6b1a0f9e8d7c6b5a4938271",
		"ci_config_ref_uri":     "gitlab.example.com/acme/payments//.gitlab-ci.yml@refs/tags/v1.2.0",
		"ci_config_sha":         "2f1c0b7e4d3a59e8c6b1a0f9e8d7c6b5a4938271",
	}
}

// KubernetesClaims is a projected service-account token (TokenRequest API)
// of service account sa in namespace ns, bound to a pod, for audience aud.
// Like the kube-apiserver, it sends aud as an array.
func KubernetesClaims(aud, ns, sa string) map[string]any {
	return map[string]any{
		"jti": "2d3b4c5e-6f70-4a1b-8c9d-0e1f2a3b4c5d",
		"sub": "system:serviceaccount:" + ns + ":" + sa,
		"aud": []any{aud},
		"kubernetes.io": map[string]any{
			"namespace": ns,
			"node": map[string]any{
				"name": "node-a",
				"uid":  "6f6c2c4a-5b3e-4d2f-9a1b-7c8d9e0f1a2b",
			},
			"pod": map[string]any{
				"name": "release-7f9c4d-abcde",
				"uid":  "0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d",
			},
			"serviceaccount": map[string]any{
				"name": sa,
				"uid":  "9e8d7c6b-5a49-3827-1605-f4e3d2c1b0a9",
			},
			"warnafter": 1700000000,
		},
	}
}
