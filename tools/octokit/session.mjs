// A scripted session of GitHub's official Node client, @octokit/rest,
// against the API at GITHUB_API_URL with the token GITHUB_TOKEN: the
// githubfake tests run it against the fake and compare what it prints (one
// JSON array of steps) with what GitHub would answer.
import { Octokit } from "@octokit/rest";

const octokit = new Octokit({
  auth: process.env.GITHUB_TOKEN,
  baseUrl: process.env.GITHUB_API_URL,
  userAgent: "oncely-octokit-session",
  log: { debug() {}, info() {}, warn() {}, error: console.error },
});
const owner = "acme";
const repo = "widgets";
const steps = [];
const step = (name, value) => steps.push({ step: name, value });
const failure = async (name, call) => {
  try {
    await call();
    step(name, "accepted");
  } catch (e) {
    step(name, { status: e.status, message: e.response?.data?.message, errors: e.response?.data?.errors });
  }
};

const issue = await octokit.rest.issues.create({
  owner, repo, title: "Export fails", labels: ["bug"],
  body: "On empty carts.\n\n<!-- oncely-key: node-1 -->",
});
step("create", { status: issue.status, number: issue.data.number, labels: issue.data.labels.map((l) => l.name), user: issue.data.user.login });
for (const n of [2, 3]) {
  await octokit.rest.issues.create({ owner, repo, title: `Issue ${n}` });
}
const comment = await octokit.rest.issues.createComment({
  owner, repo, issue_number: 1, body: "Looking into it.\n\n<!-- oncely-key: node-c1 -->",
});
step("comment", { status: comment.status, issue_url_ends: comment.data.issue_url.endsWith("/repos/acme/widgets/issues/1") });
const got = await octokit.rest.issues.get({ owner, repo, issue_number: 1 });
step("get", { title: got.data.title, comments: got.data.comments, state: got.data.state });
const all = await octokit.paginate(octokit.rest.issues.listForRepo, {
  owner, repo, state: "all", sort: "created", direction: "desc", per_page: 2,
});
step("paginate", all.map((i) => i.number));
const comments = await octokit.rest.issues.listComments({ owner, repo, issue_number: 1 });
step("listComments", comments.data.map((c) => c.body.includes("node-c1")));
const recent = await octokit.rest.issues.listCommentsForRepo({
  owner, repo, sort: "created", direction: "desc", since: "2000-01-01T00:00:00Z",
});
step("listCommentsForRepo", recent.data.length);
const found = await octokit.rest.search.issuesAndPullRequests({ q: '"node-1" repo:acme/widgets is:issue in:body' });
step("search", { total: found.data.total_count, incomplete: found.data.incomplete_results, numbers: found.data.items.map((i) => i.number) });
const inComments = await octokit.rest.search.issuesAndPullRequests({ q: "node-c1 repo:acme/widgets in:comments" });
step("searchComments", inComments.data.items.map((i) => i.number));
await failure("blankTitle", () => octokit.rest.issues.create({ owner, repo, title: " " }));
await failure("missingIssue", () => octokit.rest.issues.get({ owner, repo, issue_number: 99 }));
await failure("unmodelled", () => octokit.rest.issues.create({ owner, repo, title: "t", milestone: 1 }));
await failure("badToken", () => new Octokit({ auth: "wrong", baseUrl: process.env.GITHUB_API_URL }).rest.issues.get({ owner, repo, issue_number: 1 }));
console.log(JSON.stringify(steps));
