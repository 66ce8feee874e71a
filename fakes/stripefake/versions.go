package stripefake

import "slices"

// DefaultAPIVersion is the version the fake answers a request without a
// Stripe-Version header with (stripe-go v82's).
const DefaultAPIVersion = "2025-08-27.basil"

// apiVersions are the Stripe API versions the fake accepts in the
// Stripe-Version header: the named releases since acacia and the dated
// ones clients have pinned most since 2019, with stripe-mock's (the
// specification the differential tests run against). Config.APIVersions
// adds more.
var apiVersions = []string{
	"2019-12-03", "2020-03-02", "2020-08-27", "2022-08-01", "2022-11-15", "2023-08-16", "2023-10-16",
	"2024-04-10", "2024-06-20",
	"2024-09-30.acacia", "2024-10-28.acacia", "2024-11-20.acacia", "2024-12-18.acacia", "2025-01-27.acacia", "2025-02-24.acacia",
	"2025-03-31.basil", "2025-04-30.basil", "2025-05-28.basil", "2025-06-30.basil", "2025-07-30.basil", "2025-08-27.basil",
	"2026-08-26.dahlia",
}

// apiVersion reads the request's Stripe-Version: the version to answer
// with, or the error for one Stripe does not know.
func (h *Handler) apiVersion(v string) (string, *apiError) {
	switch {
	case v == "":
		return DefaultAPIVersion, nil
	case slices.Contains(apiVersions, v) || slices.Contains(h.cfg.APIVersions, v):
		return v, nil
	}
	return "", &apiError{Type: typeInvalidRequest, Message: "Invalid Stripe API version: " + v + ". Please see https://stripe.com/docs/upgrades for the versions Stripe supports."}
}
