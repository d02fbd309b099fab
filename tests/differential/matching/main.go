// Command matching-oracle answers, for an admission request and the service's webhook
// configurations as rendered, which of the webhooks kube-apiserver would call, by
// kube-apiserver's own code: each webhook's rules (predicates/rules.Matcher), its
// objectSelector (predicates/object.Matcher) and its matchConditions compiled and
// evaluated by the webhook accessor kube-apiserver's dispatcher uses
// (GetCompiledMatcher, in the base CEL environment of the release).
//
// It reads JSON lines on standard input. A line {"configurations": [<Mutating- or
// ValidatingWebhookConfiguration>...]} sets the webhooks asked of from then on, and is
// answered {"webhooks": <how many>}. A line {"request": <AdmissionRequest>} is answered
// {"webhooks": [{"name", "rules", "selector", "conditions", "failed", "error"}...]}, one
// entry per webhook in the order of the configurations: whether its rules and its
// objectSelector match, and what its matchConditions make of the request ("true",
// "false" with the name of the condition that was false, or "error"). A line it cannot
// read is answered {"error": "..."}. It runs until its input ends.
//
// Built by tests/e2e/build_controlplane.py; asked by tests/differential/matching.py.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	admissionv1 "k8s.io/api/admission/v1"
	registrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	celplugin "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/object"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	kjson "sigs.k8s.io/json"
)

type line struct {
	Configurations []json.RawMessage             `json:"configurations"`
	Request        *admissionv1.AdmissionRequest `json:"request"`
}

type verdict struct {
	Name       string `json:"name"`
	Rules      bool   `json:"rules"`
	Selector   bool   `json:"selector"`
	Conditions string `json:"conditions"`
	Failed     string `json:"failed,omitempty"`
	Error      string `json:"error,omitempty"`
}

type oracle struct {
	webhooks []webhook.WebhookAccessor
	compiler celplugin.ConditionCompiler
}

func (o *oracle) configure(raw []json.RawMessage) (int, error) {
	var accessors []webhook.WebhookAccessor
	for _, item := range raw {
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(item, &head); err != nil {
			return 0, err
		}
		switch head.Kind {
		case "MutatingWebhookConfiguration":
			var configuration registrationv1.MutatingWebhookConfiguration
			if err := strict(item, &configuration); err != nil {
				return 0, err
			}
			for i := range configuration.Webhooks {
				defaultSelector(&configuration.Webhooks[i].ObjectSelector)
				uid := fmt.Sprintf("%s/%d", head.Metadata.Name, i)
				accessors = append(accessors, webhook.NewMutatingWebhookAccessor(uid, head.Metadata.Name, &configuration.Webhooks[i]))
			}
		case "ValidatingWebhookConfiguration":
			var configuration registrationv1.ValidatingWebhookConfiguration
			if err := strict(item, &configuration); err != nil {
				return 0, err
			}
			for i := range configuration.Webhooks {
				defaultSelector(&configuration.Webhooks[i].ObjectSelector)
				uid := fmt.Sprintf("%s/%d", head.Metadata.Name, i)
				accessors = append(accessors, webhook.NewValidatingWebhookAccessor(uid, head.Metadata.Name, &configuration.Webhooks[i]))
			}
		default:
			return 0, fmt.Errorf("not a webhook configuration: kind %q", head.Kind)
		}
	}
	o.webhooks = accessors
	return len(accessors), nil
}

// defaultSelector does what kube-apiserver's defaulting of a stored configuration does to
// an objectSelector left out: the empty selector, which selects every object (a nil one
// would select none).
func defaultSelector(selector **metav1.LabelSelector) {
	if *selector == nil {
		*selector = &metav1.LabelSelector{}
	}
}

// strict decodes as kube-apiserver would refuse to: an unknown field is an error, so a
// configuration the oracle misreads cannot pass for one it read.
func strict(data []byte, into any) error {
	strictErrors, err := kjson.UnmarshalStrict(data, into)
	if err != nil {
		return err
	}
	if len(strictErrors) > 0 {
		return errors.Join(strictErrors...)
	}
	return nil
}

func decoded(raw runtime.RawExtension) (runtime.Object, error) {
	if len(raw.Raw) == 0 || string(raw.Raw) == "null" {
		return nil, nil
	}
	var content map[string]any
	if err := json.Unmarshal(raw.Raw, &content); err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: content}, nil
}

func (o *oracle) judge(request *admissionv1.AdmissionRequest) ([]verdict, error) {
	obj, err := decoded(request.Object)
	if err != nil {
		return nil, fmt.Errorf("object: %w", err)
	}
	old, err := decoded(request.OldObject)
	if err != nil {
		return nil, fmt.Errorf("oldObject: %w", err)
	}
	kind := schema.GroupVersionKind{Group: request.Kind.Group, Version: request.Kind.Version, Kind: request.Kind.Kind}
	resource := schema.GroupVersionResource{Group: request.Resource.Group, Version: request.Resource.Version, Resource: request.Resource.Resource}
	userInfo := &user.DefaultInfo{Name: request.UserInfo.Username, UID: request.UserInfo.UID, Groups: request.UserInfo.Groups}
	attributes := admission.NewAttributesRecord(obj, old, kind, request.Namespace, request.Name, resource,
		request.SubResource, admission.Operation(request.Operation), nil, false, userInfo)
	versioned := &admission.VersionedAttributes{
		Attributes:         attributes,
		VersionedObject:    obj,
		VersionedOldObject: old,
		VersionedKind:      kind,
	}
	verdicts := make([]verdict, 0, len(o.webhooks))
	for _, hook := range o.webhooks {
		v := verdict{Name: hook.GetName()}
		for _, rule := range hook.GetRules() {
			matcher := rules.Matcher{Rule: rule, Attr: attributes}
			if matcher.Matches() {
				v.Rules = true
				break
			}
		}
		selected, statusErr := (&object.Matcher{}).MatchObjectSelector(hook, attributes)
		if statusErr != nil {
			return nil, fmt.Errorf("%s: objectSelector: %v", v.Name, statusErr)
		}
		v.Selector = selected
		result := hook.GetCompiledMatcher(o.compiler).Match(context.Background(), versioned, nil, nil)
		switch {
		case result.Error != nil:
			v.Conditions, v.Error = "error", result.Error.Error()
		case result.Matches:
			v.Conditions = "true"
		default:
			v.Conditions, v.Failed = "false", result.FailedConditionName
		}
		verdicts = append(verdicts, v)
	}
	return verdicts, nil
}

func main() {
	o := &oracle{compiler: celplugin.NewConditionCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))}
	reader := bufio.NewReaderSize(os.Stdin, 1<<20)
	writer := bufio.NewWriter(os.Stdout)
	for {
		text, err := reader.ReadBytes('\n')
		if len(text) > 0 {
			writer.Write(answer(o, text))
			writer.WriteByte('\n')
			writer.Flush()
		}
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

func answer(o *oracle, text []byte) []byte {
	var in line
	reply := map[string]any{}
	if err := json.Unmarshal(text, &in); err != nil {
		reply["error"] = err.Error()
	} else if in.Configurations != nil {
		if count, err := o.configure(in.Configurations); err != nil {
			reply["error"] = err.Error()
		} else {
			reply["webhooks"] = count
		}
	} else if in.Request != nil {
		if verdicts, err := o.judge(in.Request); err != nil {
			reply["error"] = err.Error()
		} else {
			reply["webhooks"] = verdicts
		}
	} else {
		reply["error"] = "neither configurations nor a request"
	}
	out, err := json.Marshal(reply)
	if err != nil {
		return []byte(fmt.Sprintf(`{"error": %q}`, err.Error()))
	}
	return out
}
