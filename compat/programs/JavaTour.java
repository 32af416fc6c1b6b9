// The JVM's threads the way Java programs use them, each step checked, one
// line of deterministic results per step (compat/src/cases/java.rs runs it
// with `java JavaTour.java`, unpatched and under greenhook).
//
// Under greenhook every Java thread is a fiber on one OS thread, and the
// code they compute in (compiled and interpreted Java) has no unwind
// tables: the timed wait beside a computing thread (step "timeout") only
// times out as it does natively if that thread is preempted.
import java.io.*;
import java.net.*;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;
import java.util.concurrent.locks.*;

public class JavaTour {
    static int steps = 0;

    static void say(String s) {
        System.out.println(s);
        steps++;
    }

    static long work(long n) {
        long s = 0;
        for (long k = 0; k < n; k++) s += k ^ (k >>> 3);
        return s;
    }

    public static void main(String[] args) throws Exception {
        // A pool with a queue of tasks, and a counter under a monitor.
        ExecutorService pool = Executors.newFixedThreadPool(8);
        Object lock = new Object();
        long[] counter = {0};
        List<Future<Integer>> fs = new ArrayList<>();
        for (int i = 0; i < 64; i++) {
            final int id = i;
            fs.add(pool.submit(() -> {
                for (int k = 0; k < 1000; k++) synchronized (lock) { counter[0]++; }
                return id * id;
            }));
        }
        long sum = 0;
        for (Future<Integer> f : fs) sum += f.get();
        say("pool: 64 tasks, sum " + sum + ", counter " + counter[0]);

        // wait/notify ping-pong between two threads, and a condition.
        int[] turn = {0};
        int rounds = 2000;
        Thread pong = new Thread(() -> {
            for (int i = 0; i < rounds; i++) synchronized (turn) {
                while (turn[0] != 1) try { turn.wait(); } catch (InterruptedException e) { return; }
                turn[0] = 0;
                turn.notifyAll();
            }
        });
        pong.start();
        for (int i = 0; i < rounds; i++) synchronized (turn) {
            turn[0] = 1;
            turn.notifyAll();
            while (turn[0] != 0) turn.wait();
        }
        pong.join();
        ReentrantLock rl = new ReentrantLock();
        Condition ready = rl.newCondition();
        rl.lock();
        try {
            boolean signalled = ready.await(50, TimeUnit.MILLISECONDS);
            say("wait/notify: " + rounds + " rounds; condition await timed out: " + !signalled);
        } finally {
            rl.unlock();
        }

        // A timed wait beside a thread that computes for longer than it.
        ExecutorService one = Executors.newSingleThreadExecutor();
        Future<Long> slow = one.submit(() -> work(3_000_000_000L));
        String r;
        long t0 = System.nanoTime();
        try {
            r = "result " + (slow.get(300, TimeUnit.MILLISECONDS) != 0);
        } catch (TimeoutException e) {
            r = "timed out";
        }
        long waited = (System.nanoTime() - t0) / 1_000_000;
        slow.cancel(true);
        one.shutdownNow();
        say("timeout: get(300 ms) beside a computing thread: " + r + (waited < 2000 ? "" : " (after " + waited + " ms)"));

        // A loopback echo between threads.
        try (ServerSocket ss = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
            Thread server = new Thread(() -> {
                try (Socket s = ss.accept()) {
                    InputStream in = s.getInputStream();
                    OutputStream out = s.getOutputStream();
                    byte[] buf = new byte[4096];
                    int n;
                    while ((n = in.read(buf)) > 0) out.write(buf, 0, n);
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            });
            server.start();
            long echoed = 0;
            try (Socket c = new Socket(InetAddress.getLoopbackAddress(), ss.getLocalPort())) {
                byte[] msg = new byte[1000];
                Arrays.fill(msg, (byte) 'x');
                DataInputStream in = new DataInputStream(c.getInputStream());
                byte[] back = new byte[1000];
                for (int i = 0; i < 200; i++) {
                    c.getOutputStream().write(msg);
                    in.readFully(back);
                    if (!Arrays.equals(msg, back)) throw new IllegalStateException("echo differs");
                    echoed += back.length;
                }
            }
            server.join();
            say("echo: " + echoed + " bytes through a loopback socket");
        }

        // A child process, sleeps, a collection from many threads.
        Process p = new ProcessBuilder("sh", "-c", "echo child says hi; exit 3").redirectErrorStream(true).start();
        String line = new BufferedReader(new InputStreamReader(p.getInputStream())).readLine();
        say("process: '" + line + "', exit " + p.waitFor());
        CountDownLatch latch = new CountDownLatch(8);
        AtomicLong slept = new AtomicLong();
        for (int i = 0; i < 8; i++) {
            new Thread(() -> {
                long s = System.nanoTime();
                try { Thread.sleep(50); } catch (InterruptedException e) { }
                if (System.nanoTime() - s >= 50_000_000L) slept.incrementAndGet();
                byte[][] junk = new byte[200][];
                for (int k = 0; k < 200; k++) junk[k] = new byte[10_000];
                System.gc();
                latch.countDown();
            }).start();
        }
        latch.await();
        say("sleep and gc: " + slept.get() + " of 8 threads slept 50 ms");

        pool.shutdown();
        pool.awaitTermination(10, TimeUnit.SECONDS);
        System.out.println("done: " + steps + " steps");
    }
}
