package oncely_test

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/oncely/oncely"
)

// The HTTP layer sends UserAgent to providers; the oncely command's
// version subcommand prints Version. A program that calls a provider
// with its own client may send the same.
func ExampleUserAgent() {
	req, err := http.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
	if err != nil {
		panic(err)
	}
	req.Header.Set("User-Agent", oncely.UserAgent)
	fmt.Println(req.Header.Get("User-Agent") == "oncely/"+oncely.Version)
	fmt.Println(strings.Count(oncely.Version, "."))
	// Output:
	// true
	// 2
}
