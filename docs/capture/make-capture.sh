#!/bin/sh
# Regenerates docs/dsh-run-terminal.{ansi,txt,png}: dsh run in a 100x30
# tmux pane against the scripted fake model (cmd/dsh-fakellm), fixing a
# planted bug in a tiny Go module. Needs tmux, Go, python3 and
# ImageMagick's convert (/usr/bin/convert).
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'kill "$fake" 2>/dev/null; tmux kill-session -t dshcap 2>/dev/null; rm -rf "$work"' EXIT
go build -o "$work/bin/" "$repo/cmd/dsh" "$repo/cmd/dsh-fakellm"
mkdir -p "$work/greet" "$work/home"
cd "$work/greet"
printf 'module greet\n\ngo 1.26\n' > go.mod
printf 'package greet\n\n// Greet greets who.\nfunc Greet(name, who string) string {\n\treturn name + "," + who + "!"\n}\n' > greet.go
printf 'package greet\n\nimport "testing"\n\nfunc TestGreet(t *testing.T) {\n\tif got := Greet("Hello", "world"); got != "Hello, world!" {\n\t\tt.Fatalf("got %%q", got)\n\t}\n}\n' > greet_test.go
"$work/bin/dsh-fakellm" -script "$repo/docs/capture/script.json" > "$work/fake.out" 2>/dev/null &
fake=$!
until grep -q listening "$work/fake.out" 2>/dev/null; do sleep 0.1; done
url=$(awk '{print $3}' "$work/fake.out")
cat > "$work/demo.sh" <<DEMO
export PATH=$work/bin:\$PATH TERM=xterm-256color DSH_HOME=$work/home DEEPSEEK_API_KEY=demo DEEPSEEK_BASE_URL=$url
printf '%s\n' "\$ dsh run --permission full-access 'greet_test.go fails: fix it'"
dsh run --permission full-access 'greet_test.go fails: fix it'
printf '$ '
tmux wait-for -S done
exec sleep 600
DEMO
tmux new-session -d -s dshcap -x 100 -y 30 -c "$work/greet" "sh $work/demo.sh"
tmux wait-for done
tmux capture-pane -t dshcap -p -e > "$repo/docs/dsh-run-terminal.ansi"
tmux capture-pane -t dshcap -p > "$repo/docs/dsh-run-terminal.txt"
python3 "$repo/docs/capture/ansi2png.py" "$repo/docs/dsh-run-terminal.ansi" "$repo/docs/dsh-run-terminal.png"

# Second capture: an unreachable provider, caught mid-run, showing the
# retry notices and the live waiting line.
tmux kill-session -t dshcap
cat > "$work/down.sh" <<DEMO
export PATH=$work/bin:\$PATH TERM=xterm-256color DSH_HOME=$work/home DEEPSEEK_API_KEY=demo DEEPSEEK_BASE_URL=http://127.0.0.1:9
printf '%s\\n' "\\$ dsh run 'hello'"
dsh run 'hello'
exec sleep 600
DEMO
tmux new-session -d -s dshcap -x 100 -y 11 -c "$work/greet" "sh $work/down.sh"
# Let three retries pass (0.5 s + 1 s + 2 s of backoff) and the fourth wait begin.
sleep 5.5
tmux capture-pane -t dshcap -p -e > "$repo/docs/dsh-run-retry.ansi"
python3 "$repo/docs/capture/ansi2png.py" "$repo/docs/dsh-run-retry.ansi" "$repo/docs/dsh-run-retry.png"
