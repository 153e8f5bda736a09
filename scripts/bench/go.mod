module github.com/lockgen/lockgen/scripts/bench

go 1.26.0

replace github.com/lockgen/lockgen => ../..

require (
	github.com/bsm/redislock v0.9.4
	github.com/go-redis/redis_rate/v10 v10.0.1
	github.com/go-redsync/redsync/v4 v4.18.1
	github.com/hibiken/asynq v0.19.0
	github.com/lockgen/lockgen v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.23.0
	google.golang.org/protobuf v1.25.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dave/jennifer v1.7.1 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	github.com/go-redis/redis/v8 v8.11.5 // indirect
	github.com/golang/protobuf v1.4.2 // indirect
	github.com/google/uuid v1.2.0 // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	github.com/spf13/cast v1.3.1 // indirect
	github.com/yuin/gopher-lua v1.1.2 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/time v0.0.0-20190308202827-9d24e82272b4 // indirect
	golang.org/x/tools v0.52.0 // indirect
)

tool github.com/lockgen/lockgen/cmd/lockgen
