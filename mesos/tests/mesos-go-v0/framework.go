// A framework on mesos-go's v0 scheduler driver, run against
// `unisched serve --mesos-addr`.
//
// mesos-go's api/v0 (Debian's golang-github-mesos-mesos-go-dev 0.0.6) is a
// Go implementation of libmesos' native MesosSchedulerDriver: it speaks
// Mesos' older libprocess protocol, as Spark's, Flink's, Marathon's,
// Aurora's and Chronos' drivers do. Each message is an HTTP POST to the
// receiver's process (`/master/mesos.internal.RegisterFrameworkMessage`),
// the master's replies are POSTs to this process' own HTTP server, and the
// driver finds the leading master from its `/state`. It sends the older
// messages (RegisterFrameworkMessage, LaunchTasksMessage, KillTaskMessage,
// ReconcileTasksMessage, StatusUpdateAcknowledgementMessage, ...). Its
// AcceptOffers is not used: it POSTs a call to `/api/v1/scheduler` without
// a subscription, which Mesos answers 403 ("Framework is not connected via
// HTTP") for a framework registered over libprocess, and so does unisched.
//
// Launches TASKS command tasks and one long task it kills, asks for
// an explicit reconciliation of a task that never was, declines what it
// does not use, and once every command task finished and the killed one
// ended TASK_KILLED, stops the driver (no failover: the framework is torn
// down). Prints a JSON summary last; exits 0 when all went as expected,
// non-zero with the reason otherwise. Used by
// mesos/tests/framework_libraries.rs.
//
// With -custom the tasks run on the framework's own executor instead: this
// program again, run by the agent with -executor, on mesos-go's v0
// executor driver (libprocess too: it registers with the agent's process
// that MESOS_SLAVE_PID names). It reports each task's states, writes
// `<task id>/out.txt` in its sandbox, sends the scheduler a message per
// task and records the replies in `replies.txt`, and notes its SHUTDOWN in
// `shutdown.txt`; the scheduler then also waits for every message.
//
// Usage: framework [-custom] MASTER TASKS
//
//	framework -executor (as the agent starts it)
package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/gogo/protobuf/proto"
	"github.com/mesos/mesos-go/api/v0/auth"
	"github.com/mesos/mesos-go/api/v0/auth/sasl"
	_ "github.com/mesos/mesos-go/api/v0/auth/sasl/mech/crammd5"
	"github.com/mesos/mesos-go/api/v0/executor"
	mesos "github.com/mesos/mesos-go/api/v0/mesosproto"
	util "github.com/mesos/mesos-go/api/v0/mesosutil"
	sched "github.com/mesos/mesos-go/api/v0/scheduler"
	"golang.org/x/net/context"
)

const (
	taskCPUs     = 0.5
	taskMem      = 64.0
	executorCPUs = 0.1
	executorMem  = 32.0
	killed       = "long-running"
)

type summary struct {
	FrameworkID  string            `json:"framework_id"`
	Registered   int               `json:"registered"`
	Offers       int               `json:"offers"`
	Launched     int               `json:"launched"`
	Declined     int               `json:"declined"`
	Finished     int               `json:"finished"`
	Killed       bool              `json:"killed"`
	Reconciled   string            `json:"reconciled_unknown_task"`
	States       map[string]string `json:"last_states"`
	Failed       []string          `json:"failed"`
	Errors       []string          `json:"errors"`
	TimedOut     bool              `json:"timed_out"`
	DriverStatus string            `json:"driver_status"`
	Messages     []string          `json:"messages"`
}

type framework struct {
	mu       sync.Mutex
	tasks    int
	launched int
	long     bool
	// Set with -custom: the executor's command line, and the executors
	// started so far (their resources are held once).
	executor  string
	executors map[string]bool
	s         summary
	done      chan struct{}
	closed    bool
}

func (f *framework) finishLocked() {
	if !f.closed {
		f.closed = true
		close(f.done)
	}
}

func (f *framework) Registered(d sched.SchedulerDriver, id *mesos.FrameworkID, _ *mesos.MasterInfo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.s.FrameworkID = id.GetValue()
	f.s.Registered++
	// A hint to the allocator (ResourceRequestMessage), which takes it.
	d.RequestResources([]*mesos.Request{{Resources: []*mesos.Resource{
		util.NewScalarResource("cpus", taskCPUs),
	}}})
}

func (f *framework) Reregistered(sched.SchedulerDriver, *mesos.MasterInfo) {}
func (f *framework) Disconnected(sched.SchedulerDriver)                    {}

func scalar(o *mesos.Offer, name string) float64 {
	total := 0.0
	for _, r := range o.GetResources() {
		if r.GetName() == name && r.GetScalar() != nil {
			total += r.GetScalar().GetValue()
		}
	}
	return total
}

func (f *framework) task(o *mesos.Offer, id, command string) *mesos.TaskInfo {
	task := &mesos.TaskInfo{
		Name:    proto.String(id),
		TaskId:  util.NewTaskID(id),
		SlaveId: o.SlaveId,
		Command: util.NewCommandInfo(command),
		Resources: []*mesos.Resource{
			util.NewScalarResource("cpus", taskCPUs),
			util.NewScalarResource("mem", taskMem),
		},
	}
	if f.executor != "" {
		task.Command = nil
		task.Executor = f.executorInfo(o)
	}
	return task
}

// executorInfo is the framework's own executor on the offer's agent.
func (f *framework) executorInfo(o *mesos.Offer) *mesos.ExecutorInfo {
	id := "go-v0-runner-" + o.GetSlaveId().GetValue()
	return &mesos.ExecutorInfo{
		ExecutorId: util.NewExecutorID(id),
		Name:       proto.String(id),
		Command:    util.NewCommandInfo(f.executor),
		Resources: []*mesos.Resource{
			util.NewScalarResource("cpus", executorCPUs),
			util.NewScalarResource("mem", executorMem),
		},
	}
}

func (f *framework) ResourceOffers(d sched.SchedulerDriver, offers []*mesos.Offer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, o := range offers {
		f.s.Offers++
		cpus, mem := scalar(o, "cpus"), scalar(o, "mem")
		if f.executor != "" {
			id := f.executorInfo(o).GetExecutorId().GetValue()
			if !f.executors[id] {
				cpus -= executorCPUs
				mem -= executorMem
			}
		}
		var tasks []*mesos.TaskInfo
		for cpus >= taskCPUs && mem >= taskMem {
			var t *mesos.TaskInfo
			switch {
			case !f.long:
				f.long = true
				t = f.task(o, killed, "sleep 60")
			case f.launched < f.tasks:
				id := "task-" + strconv.Itoa(f.launched)
				f.launched++
				t = f.task(o, id, "echo hello from "+id+" > out.txt")
			}
			if t == nil {
				break
			}
			if t.Executor != nil {
				f.executors[t.Executor.GetExecutorId().GetValue()] = true
			}
			tasks = append(tasks, t)
			cpus -= taskCPUs
			mem -= taskMem
		}
		filters := &mesos.Filters{RefuseSeconds: proto.Float64(1)}
		if len(tasks) == 0 {
			f.s.Declined++
			d.DeclineOffer(o.Id, filters)
			continue
		}
		f.s.Launched += len(tasks)
		d.LaunchTasks([]*mesos.OfferID{o.Id}, tasks, filters)
	}
}

func (f *framework) OfferRescinded(sched.SchedulerDriver, *mesos.OfferID) {}

func (f *framework) StatusUpdate(d sched.SchedulerDriver, s *mesos.TaskStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := s.GetTaskId().GetValue()
	f.s.States[id] = s.GetState().String()
	switch {
	case id == "never-launched":
		f.s.Reconciled = s.GetState().String()
	case id == killed && s.GetState() == mesos.TaskState_TASK_RUNNING:
		d.KillTask(s.TaskId)
	case id == killed && s.GetState() == mesos.TaskState_TASK_KILLED:
		f.s.Killed = true
		// Offers again at once, declined ones included (ReviveOffersMessage).
		d.ReviveOffers()
		// An explicit reconciliation of a task this master never had.
		d.ReconcileTasks([]*mesos.TaskStatus{{
			TaskId:  util.NewTaskID("never-launched"),
			State:   mesos.TaskState_TASK_STAGING.Enum(),
			SlaveId: s.SlaveId,
		}})
	case s.GetState() == mesos.TaskState_TASK_FINISHED:
		f.s.Finished++
	case s.GetState() == mesos.TaskState_TASK_FAILED || s.GetState() == mesos.TaskState_TASK_LOST ||
		s.GetState() == mesos.TaskState_TASK_ERROR:
		f.s.Failed = append(f.s.Failed, id+": "+s.GetState().String()+" "+s.GetMessage())
		f.finishLocked()
	}
	f.checkLocked()
}

// checkLocked ends the run once every task ended, the long one was killed
// and the reconciliation answered (and, with -custom, every task's message
// came).
func (f *framework) checkLocked() {
	messagesDone := f.executor == "" || len(f.s.Messages) >= f.tasks
	if f.s.Finished == f.tasks && f.s.Killed && f.s.Reconciled != "" && messagesDone {
		f.finishLocked()
	}
}

// FrameworkMessage records an executor's message and answers it.
func (f *framework) FrameworkMessage(d sched.SchedulerDriver, e *mesos.ExecutorID, a *mesos.SlaveID, m string) {
	f.mu.Lock()
	f.s.Messages = append(f.s.Messages, m)
	f.checkLocked()
	f.mu.Unlock()
	d.SendFrameworkMessage(e, a, "thanks "+m)
}
func (f *framework) SlaveLost(sched.SchedulerDriver, *mesos.SlaveID) {}
func (f *framework) ExecutorLost(sched.SchedulerDriver, *mesos.ExecutorID, *mesos.SlaveID, int) {
}

func (f *framework) Error(_ sched.SchedulerDriver, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.s.Errors = append(f.s.Errors, message)
	f.finishLocked()
}

func main() {
	args := os.Args[1:]
	if len(args) == 1 && args[0] == "-executor" {
		os.Exit(runExecutor())
	}
	custom := len(args) > 0 && args[0] == "-custom"
	if custom {
		args = args[1:]
	}
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: framework [-custom] MASTER TASKS")
		os.Exit(2)
	}
	tasks, err := strconv.Atoi(args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "TASKS:", err)
		os.Exit(2)
	}
	f := &framework{tasks: tasks, done: make(chan struct{}), executors: map[string]bool{}}
	f.s.States = map[string]string{}
	if custom {
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintln(os.Stderr, "own path:", err)
			os.Exit(1)
		}
		f.executor = self + " -executor"
	}
	config := sched.DriverConfig{
		Scheduler: f,
		Framework: &mesos.FrameworkInfo{
			User: proto.String(""),
			Name: proto.String("mesos-go-v0"),
		},
		Master:         args[0],
		BindingAddress: net.ParseIP("127.0.0.1"),
	}
	// With a credential in the environment the driver authenticates
	// (SASL CRAM-MD5, its authenticatee a process of its own) before it
	// registers, and the framework names its principal.
	if principal := os.Getenv("FRAMEWORK_PRINCIPAL"); principal != "" {
		config.Credential = &mesos.Credential{
			Principal: proto.String(principal),
			Secret:    proto.String(os.Getenv("FRAMEWORK_SECRET")),
		}
		config.Framework.Principal = proto.String(principal)
		config.WithAuthContext = func(ctx context.Context) context.Context {
			ctx = auth.WithLoginProvider(ctx, sasl.ProviderName)
			return sasl.WithBindingAddress(ctx, net.ParseIP("127.0.0.1"))
		}
	}
	driver, err := sched.NewMesosSchedulerDriver(config)
	if err != nil {
		fmt.Fprintln(os.Stderr, "driver:", err)
		os.Exit(1)
	}
	if status, err := driver.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "start:", status, err)
		os.Exit(1)
	}
	select {
	case <-f.done:
	case <-time.After(90 * time.Second):
		f.mu.Lock()
		f.s.TimedOut = true
		f.mu.Unlock()
	}
	status, _ := driver.Stop(false)
	f.mu.Lock()
	f.s.DriverStatus = status.String()
	out, _ := json.Marshal(f.s)
	ok := !f.s.TimedOut && len(f.s.Failed) == 0 && len(f.s.Errors) == 0
	f.mu.Unlock()
	// Let the driver's last message (the framework's end) go out.
	time.Sleep(500 * time.Millisecond)
	fmt.Println(string(out))
	if !ok {
		os.Exit(1)
	}
}

// runner is the executor, on mesos-go's v0 executor driver: each task
// reports TASK_RUNNING, writes its file, messages the scheduler and
// finishes; the long one runs until it is killed.
type runner struct {
	mu   sync.Mutex
	done chan struct{}
}

func (r *runner) report(d executor.ExecutorDriver, task *mesos.TaskID, state mesos.TaskState) {
	if _, err := d.SendStatusUpdate(&mesos.TaskStatus{TaskId: task, State: state.Enum()}); err != nil {
		fmt.Fprintln(os.Stderr, "status update:", err)
	}
}

func (r *runner) Registered(executor.ExecutorDriver, *mesos.ExecutorInfo, *mesos.FrameworkInfo, *mesos.SlaveInfo) {
}
func (r *runner) Reregistered(executor.ExecutorDriver, *mesos.SlaveInfo) {}
func (r *runner) Disconnected(executor.ExecutorDriver)                   {}

func (r *runner) LaunchTask(d executor.ExecutorDriver, task *mesos.TaskInfo) {
	go func() {
		r.report(d, task.TaskId, mesos.TaskState_TASK_RUNNING)
		id := task.GetTaskId().GetValue()
		if id == killed {
			return
		}
		if err := os.MkdirAll(id, 0o755); err != nil {
			r.report(d, task.TaskId, mesos.TaskState_TASK_FAILED)
			return
		}
		if err := os.WriteFile(id+"/out.txt", []byte("hello from "+id+"\n"), 0o644); err != nil {
			r.report(d, task.TaskId, mesos.TaskState_TASK_FAILED)
			return
		}
		if _, err := d.SendFrameworkMessage(id); err != nil {
			fmt.Fprintln(os.Stderr, "framework message:", err)
		}
		r.report(d, task.TaskId, mesos.TaskState_TASK_FINISHED)
	}()
}

func (r *runner) KillTask(d executor.ExecutorDriver, task *mesos.TaskID) {
	r.report(d, task, mesos.TaskState_TASK_KILLED)
}

func (r *runner) FrameworkMessage(_ executor.ExecutorDriver, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, err := os.OpenFile("replies.txt", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		_, _ = f.WriteString(message + "\n")
		_ = f.Close()
	}
}

func (r *runner) Shutdown(executor.ExecutorDriver) {
	if err := os.WriteFile("shutdown.txt", []byte("shutdown\n"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "shutdown note:", err)
	}
	close(r.done)
}

func (r *runner) Error(_ executor.ExecutorDriver, message string) {
	fmt.Fprintln(os.Stderr, "executor error:", message)
}

// runExecutor runs the executor until SHUTDOWN; its exit code.
func runExecutor() int {
	r := &runner{done: make(chan struct{})}
	driver, err := executor.NewMesosExecutorDriver(executor.DriverConfig{
		Executor:       r,
		BindingAddress: net.ParseIP("127.0.0.1"),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "executor driver:", err)
		return 1
	}
	if _, err := driver.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "executor start:", err)
		return 1
	}
	<-r.done
	_, _ = driver.Stop()
	return 0
}
