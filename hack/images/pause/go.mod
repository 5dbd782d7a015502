module operator-runner.local/pause

go 1.26
