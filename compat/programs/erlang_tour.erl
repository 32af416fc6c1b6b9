#!/usr/bin/env escript
%% -*- erlang -*-
%%! +S 4 +SDcpu 4 +SDio 8 +A 4
%% The BEAM's own threads under greenhook: 4 schedulers, 4 dirty CPU and 8
%% dirty I/O schedulers, 4 async threads, the poll thread, all fibers of
%% one OS thread. Each step checks its own results and prints one line the
%% same whatever the interleaving (its time goes to stderr); the run ends
%% with "done: N steps". Run in a scratch directory: it writes files.
-mode(compile).

main(_) ->
    %% Application stops are reported with a time stamp: keep them out.
    logger:set_primary_config(level, warning),
    Steps = [{"processes", fun processes/0},
             {"timers", fun timers/0},
             {"links", fun links/0},
             {"tcp", fun tcp/0},
             {"udp", fun udp/0},
             {"http", fun http/0},
             {"files", fun files/0},
             {"dets", fun dets/0},
             {"ports", fun ports/0},
             {"ets", fun ets/0},
             {"crypto", fun crypto/0},
             {"cpu", fun cpu/0},
             {"gc", fun gc/0}],
    [step(Name, F) || {Name, F} <- Steps],
    io:format("done: ~p steps~n", [length(Steps)]),
    halt(0).

step(Name, F) ->
    T0 = erlang:monotonic_time(millisecond),
    R = F(),
    T = erlang:monotonic_time(millisecond) - T0,
    io:format("~s: ~0p~n", [Name, R]),
    io:format(standard_error, "~s took ~p ms~n", [Name, T]).

%% 20,000 processes, each answering one message; then a ring of 1,000
%% passing a token 100 times round.
processes() ->
    Self = self(),
    N = 20000,
    Ps = [spawn(fun() -> receive {ping, From, X} -> From ! {pong, self(), X * 2} end end)
          || _ <- lists:seq(1, N)],
    [P ! {ping, Self, I} || {P, I} <- lists:zip(Ps, lists:seq(1, N))],
    Sum = lists:sum([receive {pong, P, V} -> V end || P <- Ps]),
    First = spawn(fun() -> ring_first(Self) end),
    Last = lists:foldl(fun(_, Next) -> spawn(fun() -> ring(Next) end) end, First, lists:seq(1, 999)),
    First ! {next, Last},
    Last ! {token, 100 * 1000},
    Hops = receive {done, H} -> H end,
    {Sum, Hops}.
ring_first(Main) -> receive {next, N} -> ring_first(Main, N, 0) end.
ring_first(Main, Next, Hops) ->
    receive
        {token, 1} -> Main ! {done, Hops + 1};
        {token, K} -> Next ! {token, K - 1}, ring_first(Main, Next, Hops + 1)
    end.
ring(Next) ->
    receive
        {token, 1} -> Next ! {token, 1}, ring(Next);
        {token, K} -> Next ! {token, K - 1}, ring(Next)
    end.

%% Timers fire in order and none early.
timers() ->
    Self = self(),
    T0 = erlang:monotonic_time(millisecond),
    [erlang:send_after(I * 3, Self, {tick, I}) || I <- lists:reverse(lists:seq(1, 60))],
    Got = [receive {tick, I} -> {I, erlang:monotonic_time(millisecond) - T0 >= I * 3} end
           || _ <- lists:seq(1, 60)],
    Order = [I || {I, _} <- Got],
    Early = [I || {I, false} <- Got],
    ok = receive never -> late after 40 -> ok end,
    timer:sleep(30),
    {Order =:= lists:seq(1, 60), Early}.

%% Crashing linked and monitored processes.
links() ->
    process_flag(trap_exit, true),
    Linked = [spawn_link(fun() -> timer:sleep(I rem 7), exit({bad, I}) end) || I <- lists:seq(1, 500)],
    Exits = lists:sort([receive {'EXIT', P, {bad, I}} -> I end || P <- Linked]),
    Mons = [spawn_monitor(fun() -> timer:sleep(I rem 5), exit({divided, I}) end) || I <- lists:seq(1, 500)],
    Downs = length([receive {'DOWN', R, process, P, {divided, _}} -> ok end || {P, R} <- Mons]),
    process_flag(trap_exit, false),
    {Exits =:= lists:seq(1, 500), Downs}.

%% 32 clients, 50 round trips each, {packet, 4} framing, sizes up to 64 KiB.
%% A backlog of 128: with the default 5, some of 32 clients connecting at
%% once got connections the kernel then closed (unpatched too).
tcp() ->
    {ok, L} = gen_tcp:listen(0, [binary, {packet, 4}, {active, false}, {reuseaddr, true}, {backlog, 128}]),
    {ok, Port} = inet:port(L),
    Acc = spawn(fun() -> acceptor(L) end),
    Res = pmap(fun(C) ->
                   {ok, S} = gen_tcp:connect({127, 0, 0, 1}, Port, [binary, {packet, 4}, {active, false}]),
                   R = lists:sum([echo_once(S, C, K) || K <- lists:seq(1, 50)]),
                   ok = gen_tcp:close(S),
                   R
               end, lists:seq(1, 32)),
    exit(Acc, kill),
    gen_tcp:close(L),
    lists:sum(Res).
echo_once(S, C, K) ->
    M = binary:copy(<<C, K>>, (C * 977 + K * 131) rem 32768 + 1),
    ok = gen_tcp:send(S, M),
    {ok, M} = gen_tcp:recv(S, 0, 10000),
    byte_size(M).
acceptor(L) ->
    case gen_tcp:accept(L) of
        {ok, S} ->
            spawn(fun() -> acceptor(L) end),
            echo_loop(S);
        _ -> ok
    end.
echo_loop(S) ->
    case gen_tcp:recv(S, 0) of
        {ok, D} -> ok = gen_tcp:send(S, D), echo_loop(S);
        {error, closed} -> gen_tcp:close(S)
    end.

%% A UDP echo, 1,000 datagrams one at a time (while the schedulers that
%% have nothing to do spin and sched_yield).
udp() ->
    {ok, Srv} = gen_udp:open(0, [binary, {active, false}, {ip, {127, 0, 0, 1}}]),
    {ok, SPort} = inet:port(Srv),
    E = spawn(fun() -> udp_echo(Srv) end),
    ok = gen_udp:controlling_process(Srv, E),
    {ok, C} = gen_udp:open(0, [binary, {active, false}, {ip, {127, 0, 0, 1}}]),
    Got = [begin
               ok = gen_udp:send(C, {127, 0, 0, 1}, SPort, <<I:32>>),
               {ok, {_, SPort, <<J:32>>}} = gen_udp:recv(C, 0, 5000),
               J
           end || I <- lists:seq(1, 1000)],
    gen_udp:close(C),
    exit(E, kill),
    lists:sum(Got).
udp_echo(S) ->
    {ok, {A, P, D}} = gen_udp:recv(S, 0),
    ok = gen_udp:send(S, A, P, D),
    udp_echo(S).

%% inets' httpd serving a directory, httpc fetching from 16 processes.
http() ->
    ok = inets:start(),
    Root = filename:absname("www"),
    ok = filelib:ensure_dir(filename:join(Root, "x")),
    Body = binary:copy(<<"0123456789abcdef">>, 4096),
    ok = file:write_file(filename:join(Root, "big.bin"), Body),
    {ok, Pid} = inets:start(httpd, [{port, 0}, {server_name, "t"}, {server_root, Root},
                                   {document_root, Root}, {bind_address, {127, 0, 0, 1}}]),
    [{port, Port}] = httpd:info(Pid, [port]),
    Url = "http://127.0.0.1:" ++ integer_to_list(Port) ++ "/big.bin",
    Sizes = pmap(fun(_) ->
                     lists:sum([begin
                                    {ok, {{_, 200, _}, _, B}} = httpc:request(get, {Url, []}, [{timeout, 10000}], [{body_format, binary}]),
                                    B = Body,
                                    byte_size(B)
                                end || _ <- lists:seq(1, 8)])
                 end, lists:seq(1, 16)),
    ok = inets:stop(httpd, Pid),
    inets:stop(),
    lists:sum(Sizes).

%% Files written and read back from 8 processes at once (dirty I/O
%% schedulers), pread at offsets, a rename, a directory listing.
files() ->
    ok = filelib:ensure_dir("files/x"),
    Sums = pmap(fun(I) ->
                    F = "files/f" ++ integer_to_list(I),
                    Data = crypto:hash(sha512, <<I>>),
                    Big = binary:copy(Data, 16384),
                    ok = file:write_file(F, Big),
                    {ok, Fd} = file:open(F, [read, binary, raw]),
                    {ok, Part} = file:pread(Fd, 64 * 1000, 64),
                    ok = file:close(Fd),
                    Part = Data,
                    {ok, Back} = file:read_file(F),
                    Back = Big,
                    ok = file:rename(F, F ++ ".done"),
                    byte_size(Back)
                end, lists:seq(1, 8)),
    {ok, Names} = file:list_dir("files"),
    {lists:sum(Sums), lists:sort(Names)}.

dets() ->
    {ok, T} = dets:open_file(t, [{file, "t.dets"}]),
    ok = dets:insert(T, [{K, K * K} || K <- lists:seq(1, 10000)]),
    ok = dets:close(T),
    {ok, T} = dets:open_file(t, [{file, "t.dets"}]),
    N = dets:info(T, size),
    [{77, 5929}] = dets:lookup(T, 77),
    ok = dets:close(T),
    N.

%% External programs: os:cmd through a shell, and cat as a port that
%% echoes 1 MiB back, with its exit status.
ports() ->
    Cmd = os:cmd("echo hello; sleep 0.1; echo world"),
    Par = pmap(fun(I) -> os:cmd("echo " ++ integer_to_list(I)) end, lists:seq(1, 8)),
    P = open_port({spawn_executable, "/bin/cat"}, [binary, stream, use_stdio, exit_status, eof]),
    Data = binary:copy(<<"abcdefgh">>, 131072),
    true = port_command(P, Data),
    Back = port_collect(P, byte_size(Data), <<>>),
    port_close(P),
    Sh = open_port({spawn, "sh -c 'exit 3'"}, [exit_status]),
    St = receive {Sh, {exit_status, S}} -> S after 10000 -> timeout end,
    {Cmd, Par, Back =:= Data, St}.
port_collect(_P, 0, Acc) -> Acc;
port_collect(P, N, Acc) ->
    receive {P, {data, D}} -> port_collect(P, N - byte_size(D), <<Acc/binary, D/binary>>)
    after 10000 -> timeout
    end.

ets() ->
    T = ets:new(t, [public, set, {write_concurrency, true}, {read_concurrency, true}]),
    pmap(fun(I) -> [ets:insert(T, {I * 100000 + J, J}) || J <- lists:seq(1, 20000)], ok end,
         lists:seq(1, 8)),
    C = ets:new(c, [public, set, {write_concurrency, true}]),
    ets:insert(C, {n, 0}),
    pmap(fun(_) -> [ets:update_counter(C, n, 1) || _ <- lists:seq(1, 10000)], ok end, lists:seq(1, 8)),
    {ets:info(T, size), ets:lookup(C, n)}.

%% Hashes of 4 MiB binaries, on dirty CPU schedulers, from 8 processes.
crypto() ->
    Hs = pmap(fun(I) ->
                  B = binary:copy(<<I:64>>, 512 * 1024),
                  binary:decode_unsigned(binary:part(crypto:hash(sha256, B), 0, 4))
              end, lists:seq(1, 8)),
    Z = zlib:compress(binary:copy(<<"greenhook ">>, 100000)),
    {Hs, byte_size(zlib:uncompress(Z)), byte_size(crypto:strong_rand_bytes(1000))}.

cpu() ->
    lists:sum(pmap(fun(I) -> fib(22 + I rem 3) end, lists:seq(1, 8))).
fib(0) -> 0;
fib(1) -> 1;
fib(N) -> fib(N - 1) + fib(N - 2).

gc() ->
    L = pmap(fun(I) ->
                 X = lists:seq(1, 200000 + I),
                 erlang:garbage_collect(),
                 length(X)
             end, lists:seq(1, 8)),
    lists:sum(L).

pmap(F, L) ->
    S = self(),
    Ps = [spawn_link(fun() -> S ! {self(), F(X)} end) || X <- L],
    [receive {P, R} -> R end || P <- Ps].
