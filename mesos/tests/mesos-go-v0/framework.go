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
// Usage: framework MASTER TASKS
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
	mesos "github.com/mesos/mesos-go/api/v0/mesosproto"
	util "github.com/mesos/mesos-go/api/v0/mesosutil"
	sched "github.com/mesos/mesos-go/api/v0/scheduler"
)

const (
	taskCPUs = 0.5
	taskMem  = 64.0
	killed   = "long-running"
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
}

type framework struct {
	mu       sync.Mutex
	tasks    int
	launched int
	long     bool
	s        summary
	done     chan struct{}
	closed   bool
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
	return &mesos.TaskInfo{
		Name:    proto.String(id),
		TaskId:  util.NewTaskID(id),
		SlaveId: o.SlaveId,
		Command: util.NewCommandInfo(command),
		Resources: []*mesos.Resource{
			util.NewScalarResource("cpus", taskCPUs),
			util.NewScalarResource("mem", taskMem),
		},
	}
}

func (f *framework) ResourceOffers(d sched.SchedulerDriver, offers []*mesos.Offer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, o := range offers {
		f.s.Offers++
		cpus, mem := scalar(o, "cpus"), scalar(o, "mem")
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
	if f.s.Finished == f.tasks && f.s.Killed && f.s.Reconciled != "" {
		f.finishLocked()
	}
}

func (f *framework) FrameworkMessage(sched.SchedulerDriver, *mesos.ExecutorID, *mesos.SlaveID, string) {
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
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: framework MASTER TASKS")
		os.Exit(2)
	}
	tasks, err := strconv.Atoi(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "TASKS:", err)
		os.Exit(2)
	}
	f := &framework{tasks: tasks, done: make(chan struct{})}
	f.s.States = map[string]string{}
	driver, err := sched.NewMesosSchedulerDriver(sched.DriverConfig{
		Scheduler: f,
		Framework: &mesos.FrameworkInfo{
			User: proto.String(""),
			Name: proto.String("mesos-go-v0"),
		},
		Master:         os.Args[1],
		BindingAddress: net.ParseIP("127.0.0.1"),
	})
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
