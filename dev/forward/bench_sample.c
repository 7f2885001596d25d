#include "model/sample.h"
#include "common/clock.h"
#include <stdio.h>
#include <stdlib.h>
int main(void){ int V=248320; float *l=malloc(4*V); uint64_t s=1; for(int i=0;i<V;i++){s=s*6364136223846793005ull+1442695040888963407ull; l[i]=(float)((s>>11)/9007199254740992.0*20-10);} 
 struct sample_ctx *sc=sample_ctx_create(V); struct sample_params p; sample_params_default(&p); struct sample_rng r; sample_rng_seed(&r,1);
 const char *names[]={"t=1","t=0.7 top_p=0.95","top_k=20 top_p=0.8","greedy"}; 
 for(int c=0;c<4;c++){ sample_params_default(&p); if(c==1){p.temperature=0.7f;p.top_p=0.95f;} if(c==2){p.top_k=20;p.top_p=0.8f;} if(c==3)p.temperature=0;
 uint64_t t0=clock_now_ns(); for(int i=0;i<20;i++) sample_token(sc,&p,l,NULL,0,&r); printf("%s: %.2f ms/token\n",names[c],(clock_now_ns()-t0)/20e6);} return 0;}
